"""Runtimes: execute program images (native runner extension, or an emulated CPU)."""
