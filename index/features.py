"""What duplicate detection keeps of a document, computed where it is converted: the worker
processes call ``enrich`` on each file's outcomes (converters.isolation's hook), so the one writer
(``duplicates.DuplicateIndex``) only looks the features up."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING

import numpy as np

from . import fingerprints as fpr
from .checksums import bytes_checksum, words, words_checksum
from .simhash import MIN_WORDS, simhash_of_words

if TYPE_CHECKING:
    from deskdex.converters import Document, Outcome


@dataclass(frozen=True, slots=True)
class Features:
    """What duplicate detection keeps of a text: the exact key (the catalog's text checksum, None
    for an empty text), the simhash (None when too short) and the winnowed fingerprints."""

    group: str | None
    fp: int | None
    fps: np.ndarray


# Near-duplicate features (simhash, fingerprints) read a text's first FEATURE_CHARS characters:
# enough to tell two versions of a long manual apart, and a bound on the worker's time and memory
# (a 20-million-character text took 4.7 s and 240 MiB of word lists). The exact key still covers
# the whole text, read in pieces (checksums.words_checksum).
FEATURE_CHARS = 1_000_000


def features(text: str, boilerplate: str = "", text_sum: str | None = None,
             min_words: int = MIN_WORDS) -> Features:
    """Features of a document: ``text`` its main content, ``boilerplate`` the rest. Each text is
    normalised once; this is the costly part, so the indexer computes it in its worker processes
    (``enrich``), beside the conversion, rather than in the one writer."""
    main = words(text[:FEATURE_CHARS])
    # The exact key covers the whole text, as the catalog's checksum does; an empty text has no
    # key, or every empty file would be one cluster.
    if text_sum:
        group: str | None = text_sum
    elif len(text) <= FEATURE_CHARS and len(boilerplate) <= FEATURE_CHARS:
        everything = main + words(boilerplate) if boilerplate else main
        group = bytes_checksum(" ".join(everything).encode("utf-8")) if everything else None
    else:
        group = words_checksum((text, boilerplate))
    fp = simhash_of_words([w for w in main if not w.isdigit()], min_words)
    fps = fpr.fingerprints_of_words(main) if fp is not None else fpr.EMPTY
    return Features(group, fp, fps)


def document_features(doc: Document) -> Features:
    """``features`` of a document's body and boilerplate, without joining a long body whole: its
    first ``FEATURE_CHARS`` characters, and the exact key read from its pieces (the same words, so
    the same key; Document.body_chunks). A 20 MB text with one emoji joined was 77 MB more in the
    worker."""
    boilerplate = doc.body_text(boilerplate=True)
    text = doc.body_text(limit=FEATURE_CHARS + 1)
    if len(text) <= FEATURE_CHARS:  # the whole body
        return features(text, boilerplate)
    return features(text, boilerplate, text_sum=words_checksum(chain(doc.body_pieces(), (boilerplate,))))


def enrich(outcomes: list[Outcome]) -> None:
    """Worker-side hook of converters.isolation.WorkerPool: features for every converted document."""
    for o in outcomes:
        if o.document is not None:
            o.extra["features"] = document_features(o.document)
