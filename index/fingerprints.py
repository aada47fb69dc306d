"""Word n-gram fingerprints, the lecture notes' five steps:

1. parse the document into words, dropping punctuation, tags and extra space
   (``index.checksums.normalise``, the same words the text checksum sees);
2. group the words into overlapping n-grams (n = 5);
3. select some of them: winnowing (Schleimer, Wilkerson and Aiken, SIGMOD 2003), the smallest
   hash of every window of w consecutive n-grams, which guarantees that any run of w + n - 1
   words two documents share yields at least one common fingerprint (selection by
   ``hash mod p == 0`` can miss long shared passages and picks nothing in a short text);
4. hash them (done before step 3, as winnowing selects on the hashes: xxh3, 32 bits kept,
   plenty for comparing two documents);
5. store them: a sorted array per document (``dup_docs.fps`` in the catalog).

Documents are compared on the overlap of their fingerprints: ``similarity`` is the share of
fingerprints in common (Jaccard resemblance), our measure of "the share of words in common".

The patent's discovery method is ``shared_pairs``: fingerprints that occur in one document
only are dropped before any comparison (they cannot make a pair), and documents sharing enough
of the rest are candidates.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Mapping

import numpy as np
import xxhash

from .checksums import words

logger = logging.getLogger(__name__)

NGRAM = 5
WINDOW = 4
EMPTY = np.empty(0, dtype=np.uint32)


def fingerprints(text: str, n: int = NGRAM, window: int = WINDOW) -> np.ndarray:
    """The selected n-gram hashes of ``text``: a sorted, duplicate-free uint32 array."""
    return fingerprints_of_words(words(text), n, window)


def fingerprints_of_words(ws: list[str], n: int = NGRAM, window: int = WINDOW) -> np.ndarray:
    """``fingerprints`` over words already normalised."""
    if len(ws) < n:
        # A text shorter than one n-gram is one fingerprint (or none): exact match territory.
        return np.array([_hash(" ".join(ws))], dtype=np.uint32) if ws else EMPTY
    # Each n-gram is its words joined by spaces, in UTF-8: a slice of the whole text joined once,
    # hashed with no Python code per n-gram (the same bytes as joining each n-gram: same hashes).
    text = " ".join(ws)
    data = text.encode("utf-8")
    sizes = np.fromiter(map(len, ws) if len(data) == len(text) else (len(w.encode("utf-8")) for w in ws),
                        dtype=np.int64, count=len(ws))
    ends = np.cumsum(sizes + 1) - 1  # where each word ends in ``data``
    starts = ends - sizes
    grams = map(slice, starts[:len(ws) - n + 1].tolist(), ends[n - 1:].tolist())
    hashes = np.fromiter(map(xxhash.xxh3_64_intdigest, map(data.__getitem__, grams)), dtype=np.uint64,
                         count=len(ws) - n + 1).astype(np.uint32)  # the low 32 bits
    return winnow(hashes, window)


def _hash(gram: str) -> int:
    return xxhash.xxh3_64_intdigest(gram.encode("utf-8")) & 0xFFFFFFFF


def winnow(hashes: np.ndarray, window: int) -> np.ndarray:
    """The minimum of every window of ``window`` hashes, as a set. Winnowing picks the rightmost
    of equal minima; as a set of values, which one is picked makes no difference."""
    if len(hashes) <= window:
        return np.unique(hashes[[int(np.argmin(hashes))]])
    k = len(hashes) - window + 1
    low = hashes[:k].copy()
    for i in range(1, window):
        np.minimum(low, hashes[i:i + k], out=low)
    return np.unique(low)


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Share of fingerprints in common, |A ∩ B| / |A ∪ B|, from 0 to 1."""
    if not len(a) or not len(b):
        return 0.0
    common = len(np.intersect1d(a, b, assume_unique=True))
    return common / (len(a) + len(b) - common)


def to_blob(fps: np.ndarray) -> bytes:
    return fps.astype("<u4").tobytes()


def from_blob(blob: bytes | None) -> np.ndarray:
    return np.frombuffer(blob, dtype="<u4").astype(np.uint32) if blob else EMPTY


def shared_pairs(docs: Mapping[int, np.ndarray], min_similarity: float) -> dict[tuple[int, int], float]:
    """The patent's discovery: drop the fingerprints found in one document only, then score the
    pairs of documents that share any of the rest; keep those with similarity >= the threshold."""
    postings: dict[int, list[int]] = defaultdict(list)
    for doc, fps in docs.items():
        for h in fps.tolist():
            postings[h].append(doc)
    shared: dict[tuple[int, int], int] = defaultdict(int)
    for ids in postings.values():
        if len(ids) < 2:
            continue  # occurs in one document only: dropped, as the patent says
        ids.sort()
        for i, a in enumerate(ids):
            for b in ids[i + 1:]:
                shared[(a, b)] += 1
    out = {}
    for (a, b), common in shared.items():
        sim = common / (len(docs[a]) + len(docs[b]) - common)
        if sim >= min_similarity:
            out[(a, b)] = sim
    return out

