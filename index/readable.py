"""Duplicate clusters as one reader of an enterprise-mode daemon sees them: among the documents
that reader may read, and nothing else.

A cluster (index/clusters.py) is a connected component of the duplicate graph over every
document. Shown to a user as it is, it would tell of documents the user may not read: a cluster
id on a hit, ``dup:yes``, a duplicate count, or two of the user's documents collapsed into one
hit because a private document of someone else bridges them. So a reader's clusters are the
components of the graph cut down to the documents it may read (their own near-duplicate edges
and exact-copy groups), each named by its smallest document id: what the reader sees depends on
its readable documents alone. Left open: the near-duplicate edges were found among at most
``MAX_CANDIDATES`` simhash candidates (index/duplicates.py), so hundreds of near-identical
documents of others could crowd out an edge between two of the reader's documents.

Within a cluster, a search collapses only the copies (issue 17): documents a person would call
the same one. Two documents are copies when they have the same text in the same format (the
text checksum and the MIME type), or are near-duplicates of the same format and language at
``COPY_SIMILARITY`` or more of their fingerprints. The rest of a cluster (another format of
the same text, another version, a translation that shares part of its body) is "similar": shown
as hits of their own, each saying how many similar documents there are. Without a reader
(``uid`` None) every document is readable: the same code answers root's searches.
"""

from __future__ import annotations

import re
import sqlite3
import sys
import weakref
from array import array
from dataclasses import dataclass, field
from typing import Any, Iterable

from .access import EVERYONE, reader_terms
from .clusters import UnionFind

# Near-duplicates at or above this share of fingerprints in common are copies, collapsed in a
# search; below it, similar. Chosen from the clusters of the test corpus (docs/benchmarks.md,
# "Collapsing (issue 17)"): successive versions of one text (the Debian Constitution 1.1 to
# 1.8, git's release notes) share 0.91 to 0.985 of their fingerprints; what people call the same
# document (a license with another year, a file saved again) shares 0.99 or more.
COPY_SIMILARITY = 0.99
# The fingerprints cover a document's main text only: pages whose main text was not found (index
# pages of a manual, a table of contents) share all of theirs while their sizes differ tenfold.
# Near-copies are of about the same size too.
COPY_SIZE_RATIO = 0.9
# A path part that names a language: "de", "pt_BR", "zh-CN", "ca@valencia" (URI-encoded too).
_LANGUAGE_TAG = re.compile(r"^[a-z]{2,3}(?:(?:[-_@]|%40)[A-Za-z0-9]{2,8})?$")
# Clusters kept from one search to the next per connection, all readers together: past it, the
# kept ones are dropped (a few kilobytes each; the largest, hundreds of documents, a megabyte).
MAX_KEPT_CLUSTERS = 4096


def may_read(readers: str | None, uid: int) -> bool:
    """What the index's ``reader IN (uid, -1)`` filter says of a catalog row's ``readers``."""
    terms = reader_terms(readers)
    return uid in terms or EVERYONE in terms


# What decides whether two documents may be copies: (text checksum, MIME type, language, the
# parts of the URI between "/" and ".", split once per document rather than once per edge, size).
_Kind = tuple[str | None, str, str | None, tuple[str, ...], int]


@dataclass(slots=True)
class _Split:
    """One global cluster cut down to a reader's documents: each readable document's component
    (``similar``) and, worked out when first asked, its copies (``copies``), both sorted lists of
    ids including itself."""

    ids: dict[str, int]  # uri -> doc id, readable documents only
    kinds: dict[int, _Kind]
    edges: list[tuple[int, int]]  # the near-duplicate edges among the readable documents
    similar: dict[int, list[int]]
    copies: dict[int, list[int]] | None = None


@dataclass(slots=True)
class _Kept:
    """What one connection has worked out of the catalog as it was at ``version``."""

    version: tuple[int, int]
    splits: dict[int | None, dict[int, _Split]] = field(default_factory=dict)  # reader -> cluster -> split
    columns: set[str] | None = None

    def count(self) -> int:
        return sum(len(of) for of in self.splits.values())


# Per connection: a daemon's read-only views each keep theirs for as long as the catalog is
# unchanged.
_KEPT: weakref.WeakKeyDictionary[sqlite3.Connection, _Kept] = weakref.WeakKeyDictionary()


def _kept(db: sqlite3.Connection) -> _Kept | None:
    """``db``'s clusters worked out by earlier searches, dropped when the catalog has changed
    since (or they number more than ``MAX_KEPT_CLUSTERS``); None when ``db`` keeps none (a plain
    sqlite3 connection takes no weak reference). The catalog's version: SQLite's
    ``data_version``, which changes when another connection commits (the daemon's indexer
    writes through another than its searches'), and the rows this connection changed itself."""
    try:
        kept = _KEPT.get(db)
    except TypeError:
        return None
    version = (db.execute("PRAGMA data_version").fetchone()[0], db.total_changes)
    if kept is None or kept.version != version or kept.count() > MAX_KEPT_CLUSTERS:
        kept = _KEPT[db] = _Kept(version)
    return kept


class ReadableClusters:
    """The clusters of one reader (``uid`` None: every document), worked out cluster by cluster
    as asked. A cluster's split and copies (the cost of a search that finds a large cluster:
    two catalog queries, an edge list, fingerprints) are kept on the connection for the next
    searches while the catalog stays unchanged (``_kept``)."""

    def __init__(self, db: sqlite3.Connection, uid: int | None) -> None:
        self.db = db
        self.uid = uid
        kept = _kept(db)
        # global cluster -> its split
        self._of: dict[int, _Split] = {} if kept is None else kept.splits.setdefault(uid, {})
        self._kept = kept
        self._cols: set[str] | None = None if kept is None else kept.columns

    def component(self, uri: str, cluster: int) -> list[int]:
        """The ids of the readable documents in the readable cluster of the document ``uri``
        (itself included, sorted), given ``cluster``, its cluster id over every document (0:
        none); a single id or none when it stands alone."""
        return self._members(uri, cluster, copies=False)

    def copies(self, uri: str, cluster: int) -> list[int]:
        """As ``component``, its copies only: what one collapsed hit stands for."""
        return self._members(uri, cluster, copies=True)

    def cluster_id(self, uri: str, cluster: int) -> int:
        """The id to show: the smallest document id of the readable cluster, 0 when alone."""
        members = self.component(uri, cluster)
        return members[0] if len(members) > 1 else 0

    def copy_id(self, uri: str, cluster: int) -> int:
        """What a search collapses on: the smallest id of the document's copies, 0 when it has none."""
        members = self.copies(uri, cluster)
        return members[0] if len(members) > 1 else 0

    def _members(self, uri: str, cluster: int, copies: bool) -> list[int]:
        if not cluster:
            return []
        if cluster not in self._of:
            self._of[cluster] = self._split(cluster)
        split = self._of[cluster]
        doc = split.ids.get(uri)
        if doc is None:
            # Alone in the cluster for this reader (or not readable at all: then the search never
            # found it, and the caller asks of a document it may read).
            row = self.db.execute("SELECT id FROM docs WHERE uri=?", (uri,)).fetchone()
            return [] if row is None else [row[0]]
        return (self._copies(split) if copies else split.similar).get(doc, [doc])

    def _readable(self, readers: str | None) -> bool:
        return self.uid is None or may_read(readers, self.uid)

    def _split(self, cluster: int) -> _Split:
        mime, lang, size = (f"d.{c}" if c in self._columns() else "NULL" for c in ("mime", "lang", "size"))
        rows = self.db.execute(f"SELECT c.doc, c.grp, d.readers, d.uri, {mime}, {lang}, {size} FROM dup_cluster c "
                               "JOIN docs d ON d.id = c.doc WHERE c.cluster=?", (cluster,)).fetchall()
        kinds: dict[int, _Kind] = {doc: _kind_of(grp, kind or "", language, uri, int(n or 0))
                                   for doc, grp, readers, uri, kind, language, n in rows if self._readable(readers)}
        ids = {uri: doc for doc, _, _, uri, _, _, _ in rows if doc in kinds}
        if len(kinds) < 2:
            return _Split(ids, kinds, [], {}, {})
        edges = [(a, b) for a, b in self.db.execute("SELECT e.a, e.b FROM dup_edges e JOIN dup_cluster c "
                                                    "ON c.doc = e.a WHERE c.cluster=?", (cluster,))
                 if a in kinds and b in kinds]
        if self.uid is None:  # every document readable: the cluster is one component already
            members = sorted(kinds)
            return _Split(ids, kinds, edges, dict.fromkeys(members, members))
        return _Split(ids, kinds, edges, _components({d: k[0] for d, k in kinds.items()}, edges))

    def _copies(self, split: _Split) -> dict[int, list[int]]:
        """Copies: the same text in the same format, or a near-duplicate of the same format and
        language close enough that a person would call it the same document."""
        if split.copies is None:
            kinds = split.kinds
            same_kind = [(a, b) for a, b in split.edges if _same_kind(kinds[a], kinds[b])
                         and _close_in_size(kinds[a][4], kinds[b][4])]
            split.copies = _components({d: None for d in kinds}, self._close(same_kind) + _same_texts(kinds))
        return split.copies

    def _close(self, edges: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """The edges whose two documents share ``COPY_SIMILARITY`` of their fingerprints."""
        if not edges:
            return []
        docs = sorted({d for e in edges for d in e})
        marks = ",".join("?" * len(docs))
        blobs = dict(self.db.execute(f"SELECT doc, fps FROM dup_docs WHERE doc IN ({marks})", docs))
        fps = {d: _fingerprints(blobs.get(d)) for d in docs}
        return [(a, b) for a, b in edges if _similarity(fps[a], fps[b]) >= COPY_SIMILARITY]

    def _columns(self) -> set[str]:
        """The catalog's columns: a ``lang`` column tells documents' languages (when the indexer
        knows them); a bare test catalog has no ``mime``."""
        if self._cols is None:
            self._cols = {r[1] for r in self.db.execute("PRAGMA table_info(docs)")}
            if self._kept is not None:
                self._kept.columns = self._cols
        return self._cols

    def with_duplicates(self) -> list[str]:
        """The URIs of every readable document with a readable duplicate (``dup:yes``). Reads
        every clustered document: the price of ``dup:`` for a reader."""
        rows = self.db.execute("SELECT DISTINCT c.cluster, d.readers FROM docs d "
                               "JOIN dup_cluster c ON c.doc = d.id WHERE d.cluster IS NOT NULL").fetchall()
        out: list[str] = []
        for cluster in sorted({c for c, readers in rows if self._readable(readers)}):
            if cluster not in self._of:
                self._of[cluster] = self._split(cluster)
            split = self._of[cluster]
            out.extend(uri for uri, d in split.ids.items() if len(split.similar.get(d, [d])) > 1)
        return sorted(out)


def _fingerprints(blob: bytes | None) -> frozenset[int]:
    """A document's fingerprints (index/fingerprints.py's ``to_blob``: little-endian 32-bit, each
    once), read without numpy: loading it is a quarter of a search's start without a daemon."""
    if not blob:
        return frozenset()
    values = array("I", blob)  # 4 bytes wherever deskdex runs
    if sys.byteorder == "big":
        values.byteswap()
    return frozenset(values)


def _similarity(a: frozenset[int], b: frozenset[int]) -> float:
    """index/fingerprints.py's ``similarity``: the share of fingerprints in common, |A ∩ B| / |A ∪ B|."""
    if not a or not b:
        return 0.0
    common = len(a & b)
    return common / (len(a) + len(b) - common)


def _same_kind(a: _Kind, b: _Kind) -> bool:
    """Two documents may be copies: the same MIME type and the same language. Languages differ
    when the catalog tells both (a ``lang`` column) and they differ, or when two paths differ only
    in a part naming a language ("handbook/de-DE/intro.html", "handbook/fr-FR/intro.html"): those
    are translations even where the text is not translated yet (the catalog's language, told from
    the text, is then the same), and a translation whose body is partly the original's is not a copy."""
    if a[1] != b[1]:
        return False
    if a[2] is not None and b[2] is not None and a[2] != b[2]:
        return False
    return not _languages_differ(a[3], b[3])


def _languages_differ(pa: tuple[str, ...], pb: tuple[str, ...]) -> bool:
    if len(pa) != len(pb) or pa == pb:
        return False
    differ = [i for i, (x, y) in enumerate(zip(pa, pb)) if x != y]
    return len(differ) == 1 and bool(_LANGUAGE_TAG.match(pa[differ[0]]) and _LANGUAGE_TAG.match(pb[differ[0]]))


@dataclass(frozen=True, slots=True)
class CopyKey:
    """What says whether two documents of different indexes are copies, by the rule of ``_copies``
    (a merged search over shards collapses them as one index would): the same text, or a
    near-duplicate of the same kind and size sharing ``COPY_SIMILARITY`` of its fingerprints."""

    text_sum: str | None
    mime: str
    lang: str | None
    uri: str
    size: int
    fps: frozenset[int]
    kind: _Kind = field(init=False, repr=False, compare=False)  # made once: a merge compares each key many times

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", _kind_of(self.text_sum, self.mime, self.lang, self.uri, self.size))

    def to_json(self) -> list[Any]:
        return [self.text_sum, self.mime, self.lang, self.uri, self.size, sorted(self.fps)]

    @classmethod
    def from_json(cls, v: list[Any]) -> CopyKey:
        text_sum, mime, lang, uri, size, fps = v
        return cls(None if text_sum is None else str(text_sum), str(mime), None if lang is None else str(lang),
                   str(uri), int(size), frozenset(int(f) for f in fps))


def copy_keys(db: sqlite3.Connection, uris: list[str]) -> dict[str, CopyKey]:
    """The CopyKey of each of ``uris`` the catalog holds with a text."""
    if not uris:
        return {}
    marks = ",".join("?" * len(uris))
    rows = db.execute(f"SELECT d.uri, d.text_sum, d.mime, d.lang, d.size, f.fps FROM docs d "
                      f"LEFT JOIN dup_docs f ON f.doc = d.id WHERE d.uri IN ({marks})", uris).fetchall()
    return {uri: CopyKey(text_sum, mime or "", lang, uri, int(size or 0), _fingerprints(fps))
            for uri, text_sum, mime, lang, size, fps in rows if text_sum}


def are_copies(a: CopyKey, b: CopyKey) -> bool:
    if not _same_kind(a.kind, b.kind):
        return False
    if a.text_sum == b.text_sum:
        return True
    return _close_in_size(a.size, b.size) and _similarity(a.fps, b.fps) >= COPY_SIMILARITY


def _kind_of(text_sum: str | None, mime: str, lang: str | None, uri: str, size: int) -> _Kind:
    return (text_sum, mime, lang, tuple(re.split(r"[/.]", uri)), size)


def _close_in_size(a: int, b: int) -> bool:
    return min(a, b) >= COPY_SIZE_RATIO * max(a, b)


def _same_texts(kinds: dict[int, _Kind]) -> list[tuple[int, int]]:
    """Edges joining the documents with the same text (checksum) that may be copies (``_same_kind``):
    each to the first of its group it may be a copy of, so a thousand copies cost a thousand edges."""
    firsts: dict[str, list[int]] = {}
    out = []
    for d in sorted(kinds):
        grp = kinds[d][0]
        if grp is None:
            continue
        others = firsts.setdefault(grp, [])
        twin = next((f for f in others if _same_kind(kinds[f], kinds[d])), None)
        if twin is None:
            others.append(d)
        else:
            out.append((twin, d))
    return out


def _components(groups: dict[int, str | None], edges: Iterable[tuple[int, int]]) -> dict[int, list[int]]:
    """Each document's component over the edges and the groups (documents sharing a group key)
    among ``groups``' documents."""
    uf = UnionFind(groups)
    for a, b in edges:
        if a in groups and b in groups:
            uf.union(a, b)
    first: dict[str, int] = {}
    for doc, grp in groups.items():
        if grp is not None:
            uf.union(first.setdefault(grp, doc), doc)
    out: dict[int, list[int]] = {}
    for group in uf.groups():
        members = sorted(group)
        for d in members:
            out[d] = members
    return out
