"""Processes, configuration, the command line and (later) the socket and clients."""
