"""Helpers the tests share: runners, fault injection, architectures, the CPU view, random graphs."""
