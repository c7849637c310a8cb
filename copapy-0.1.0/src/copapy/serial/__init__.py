"""Talking to runners over a byte stream: the wire protocol, the link (requests, heartbeat) and
SerialTarget's transport."""
