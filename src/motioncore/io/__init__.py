"""Layer io: files in and out (BVH, Blender .fbx/.blend, atomic writes). May import core and errors."""
