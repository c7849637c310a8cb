"""The runner's own SHA-256 and HMAC-SHA256 (runner/src/sha256.c, used by every runner for
the session authentication of docs/protocol.md) against Python's hashlib and hmac."""

from __future__ import annotations

import hashlib
import hmac
import random

from copapy import _runner


def test_sha256_matches_hashlib_on_random_inputs() -> None:
    rng = random.Random(12)
    lengths = list(range(0, 200)) + [rng.randrange(200, 5000) for _ in range(2800)]
    for n in lengths:  # every length around the 55/56/64-byte padding edges, then random
        data = rng.randbytes(n)
        assert _runner.sha256(data) == hashlib.sha256(data).digest(), n
    assert len(lengths) >= 3000


def test_hmac_matches_python_hmac_on_random_inputs() -> None:
    rng = random.Random(34)
    cases = 0
    for key_len in list(range(0, 140)) + [rng.randrange(0, 300) for _ in range(3000)]:
        key = rng.randbytes(key_len)  # shorter, equal to and longer than the 64-byte block
        msg = rng.randbytes(rng.randrange(0, 1100))
        assert _runner.hmac_sha256(key, msg) == hmac.new(key, msg, hashlib.sha256).digest()
        cases += 1
    assert cases >= 3000
