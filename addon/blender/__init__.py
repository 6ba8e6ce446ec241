"""The add-on's Blender layer: operators, panels, properties, and reading and writing F-curves. Computes
nothing of its own: it reads the scene, calls ``..core`` and writes the result."""
