"""Talking to runners over a byte stream: the wire protocol and SerialTarget's transport."""
