"""Layer wire: the ZeroMQ protocol and client, vendored into the Blender add-on. Imports only stdlib, numpy, zmq and (optionally) msgspec (no other motioncore module)."""
