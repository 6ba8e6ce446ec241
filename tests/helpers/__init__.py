"""Helpers shared by test modules (no test module imports another): real-bpy venvs (`blender`), the add-on's
bpy-free modules under test (`addon`), server subprocesses (`server`), the CLI in-process and small clips (`cli`)."""
