"""Simhash, exactly as the lecture notes give it (Charikar's fingerprint):

1. the document becomes a set of features with weights: its words, weighted by their frequency;
2. each word gets a b-bit hash (b = 64; xxh3, stable across runs and machines);
3. a b-dimensional vector V: for every word, add its weight to component i where bit i of its
   hash is 1, subtract it where the bit is 0;
4. the fingerprint has bit i set where component i of V is positive.

Two texts whose word vectors are close in cosine similarity get fingerprints a small Hamming
distance apart. Texts with too little to go on get no simhash at all (``None``): a short text,
one made only of numbers, or one whose every word is boilerplate would otherwise land close to
each other and to everything else built from the same few words.
"""

from __future__ import annotations

import logging
from collections import Counter

import numpy as np
import xxhash

from .checksums import words

logger = logging.getLogger(__name__)

BITS = 64
MIN_WORDS = 20  # fewer content words than this: no simhash (measured in docs/duplicates.md)
_SHIFTS = np.arange(BITS, dtype=np.uint64)
_MASK64 = (1 << BITS) - 1


def content_words(text: str) -> list[str]:
    """Words that say what a text is about: numbers alone (page numbers, dates, table cells)
    do not, so they are left out of the weight vector and of the length test."""
    return [w for w in words(text) if not w.isdigit()]


def word_hash(word: str) -> int:
    return xxhash.xxh3_64_intdigest(word.encode("utf-8"))


def simhash(text: str, min_words: int = MIN_WORDS) -> int | None:
    """The 64-bit simhash of ``text`` (main content only: leave boilerplate out), or None
    when the text has fewer than ``min_words`` content words."""
    return simhash_of_words(content_words(text), min_words)


def simhash_of_words(content: list[str], min_words: int = MIN_WORDS) -> int | None:
    """``simhash`` over words already normalised, numbers left out (``content_words``)."""
    if len(content) < min_words:
        return None
    return simhash_of_counts(Counter(content))


def simhash_of_counts(counts: Counter[str] | dict[str, int]) -> int:
    """Steps 2-4 of the procedure over ``{word: weight}``; vectorised over the unique words."""
    # word_hash of each word, with no Python call per word
    hashes = np.fromiter(map(xxhash.xxh3_64_intdigest, map(str.encode, counts)), dtype="<u8", count=len(counts))
    weights = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
    bits = np.unpackbits(hashes.view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")  # (words, 64)
    # +weight where the bit is 1, -weight where it is 0, summed over words: the vector V.
    v = 2.0 * (weights @ bits) - weights.sum()
    positive = (v > 0).astype(np.uint64)
    return int(np.bitwise_or.reduce(positive << _SHIFTS))


def distance(a: int, b: int) -> int:
    """Hamming distance between two fingerprints."""
    return ((a ^ b) & _MASK64).bit_count()


def to_signed(fp: int) -> int:
    """A 64-bit fingerprint as SQLite's signed INTEGER."""
    return fp - (1 << BITS) if fp >= 1 << (BITS - 1) else fp


def to_unsigned(value: int) -> int:
    return value & _MASK64
