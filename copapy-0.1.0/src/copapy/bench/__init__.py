"""Benchmarks shipped with copapy (``copapy bench ...``)."""
