"""Layer core: motion types and maths (rotations, skeleton, motion, kinematics). May import only motioncore.errors."""
