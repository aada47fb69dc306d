"""What a shard answers to a merged search (index/shards.py), here or over HTTP (index/remote.py,
daemon/shardserver.py): word statistics, and its candidates with what the merge needs of them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deskdex.wire import WordStats

if TYPE_CHECKING:
    from deskdex.protocol import SearchHit

    from .readable import CopyKey


class FixedStats:
    """Word statistics known in advance (index.query.WordStats): a shard's for the words of one
    query, or several shards' added up. A word not asked for counts 0."""

    def __init__(self, num_docs: int, freqs: dict[tuple[str, str], int]) -> None:
        self.num_docs = num_docs
        self.freqs = freqs

    def doc_freq(self, field_name: str, field_value: str) -> int:
        return self.freqs.get((field_name, field_value), 0)

    def knows(self, field_name: str, field_value: str) -> bool:
        return (field_name, field_value) in self.freqs

    @classmethod
    def pooled(cls, parts: Sequence[FixedStats]) -> FixedStats:
        freqs: dict[tuple[str, str], int] = {}
        for part in parts:
            for key, n in part.freqs.items():
                freqs[key] = freqs.get(key, 0) + n
        return cls(sum(p.num_docs for p in parts), freqs)


@dataclass
class Part:
    """One shard's answer to a merged search: its hits (no snippets), the explanation of each hit's
    score (relevance only: what the merge re-weighs), what tells each hit's copies in other shards
    (None: a document without a text), its count of matches and of documents."""

    total: int
    hits: list[SearchHit]
    trees: list[dict[str, Any] | None]
    keys: list[CopyKey | None]
    num_docs: int


def stats_message(stats: FixedStats) -> WordStats:
    """``stats`` as a shard sends them (deskdex.wire)."""
    terms = sorted(stats.freqs)
    return WordStats(stats.num_docs, terms, [stats.freqs[t] for t in terms])


def stats_of(msg: WordStats) -> FixedStats:
    """The statistics a shard sent (checked by deskdex.wire: one count a word)."""
    return FixedStats(msg.num_docs, dict(zip(msg.terms, msg.freqs)))
