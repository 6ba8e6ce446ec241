"""The add-on's computing layer: pure Python + numpy, importable and testable without bpy (rig maps, key masks,
windows, request building, the correction of a deterministic model's answer, the worker thread). Imports only
the vendored library copies (``..vendor``), numpy and the standard library."""
