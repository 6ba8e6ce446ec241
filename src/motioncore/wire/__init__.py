"""Layer wire: the ZeroMQ protocol and client, vendored into the Blender add-on. Imports only stdlib, numpy and zmq (no other motioncore module)."""
