"""Winnowed n-gram fingerprints as the lecture notes define them: computed without Python code per
n-gram, they must equal the definition, n-gram by n-gram, for every script (the values are stored
in catalogs and compared with those of later runs)."""

from __future__ import annotations

import random

import numpy as np
import xxhash

from deskdex.index.checksums import words
from deskdex.index.fingerprints import NGRAM, WINDOW, fingerprints, fingerprints_of_words, similarity, winnow


def reference(ws: list[str], n: int = NGRAM, window: int = WINDOW) -> list[int]:
    """Each n-gram joined by spaces and hashed (xxh3, low 32 bits); in every window of ``window``
    hashes the rightmost minimum; the set of those."""
    if len(ws) < n:
        return [xxhash.xxh3_64_intdigest(" ".join(ws).encode()) & 0xFFFFFFFF] if ws else []
    hashes = [xxhash.xxh3_64_intdigest(" ".join(ws[i:i + n]).encode()) & 0xFFFFFFFF for i in range(len(ws) - n + 1)]
    if len(hashes) <= window:
        return [min(hashes)]
    picked = set()
    for i in range(len(hashes) - window + 1):
        w = hashes[i:i + window]
        picked.add(hashes[i + max(j for j in range(window) if w[j] == min(w))])
    return sorted(picked)


def random_words(rng: random.Random, n: int) -> list[str]:
    pick = [lambda: rng.randint(97, 122), lambda: rng.randint(0xC0, 0x24F), lambda: rng.randint(0x400, 0x4FF),
            lambda: rng.randint(0x4E00, 0x4FFF), lambda: rng.randint(0x1F600, 0x1F640)]
    return ["".join(chr(rng.choice(pick)()) for _ in range(rng.randint(1, 7))) for _ in range(n)]


def test_equal_to_the_definition_in_every_script_and_length():
    rng = random.Random(2)
    for n in [0, 1, 4, 5, 6, 8, 9, 30, 400]:
        for _ in range(5):
            ascii_ws = ["".join(chr(rng.randint(97, 99)) for _ in range(rng.randint(1, 3))) for _ in range(n)]
            for ws in (ascii_ws, random_words(rng, n)):
                assert fingerprints_of_words(ws).tolist() == reference(ws)
    assert fingerprints_of_words([]).dtype == np.uint32


def test_winnow_keeps_the_window_minima_ties_included():
    rng = np.random.default_rng(4)
    for size in range(1, 60):
        for high in (3, 2**32):
            h = rng.integers(0, high, size, dtype=np.uint64).astype(np.uint32)
            expect = {int(min(h[i:i + WINDOW])) for i in range(max(1, size - WINDOW + 1))}
            assert winnow(h, WINDOW).tolist() == sorted(expect)


def test_stable_values_and_similarity():
    # The reference is what catalogs hold: a fingerprint stored must mean the same in the next run.
    text = "The quick brown fox jumps over the lazy dog while the cat sleeps in the sun"
    fps = fingerprints(text)
    assert fps.tolist() == reference(words(text))
    assert similarity(fps, fingerprints(text + " and dreams")) > 0.5
    assert similarity(fps, fingerprints("Nothing at all in common with that sentence here today")) == 0.0
