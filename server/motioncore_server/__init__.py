"""motioncore_server: the ZeroMQ inference service (issue 5). Imports motioncore; never imported by it."""
