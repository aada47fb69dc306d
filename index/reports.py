"""What the clients show about the collection, read from the catalog: failures, documents per
watched folder, and duplicate clusters with the space deleting the identical copies would free."""

from __future__ import annotations

import sqlite3
from typing import Any, TypedDict

from deskdex.converters import PARTIAL
from deskdex.paths import path_to_uri

from . import fingerprints as fpr
from .collection import Collection
from .originals import originality


def failures(coll: Collection) -> list[dict[str, Any]]:
    """Every file that failed to convert, with its reason and message, and for a failure that may
    pass another time, the failed attempts so far and when it is tried again (``retry_at``, seconds
    since the epoch; null: when the file changes). A file a limit cut short is indexed, and listed
    here too (reason ``partial``, the message says what was left out)."""
    return [{"path": r.path, "uri": r.uri, "reason": r.reason, "message": r.error, "attempts": r.attempts,
             "retry_at": r.retry_at} for r in coll.catalog.rows("status='failed' OR reason=?", (PARTIAL,))]


def folder_counts(coll: Collection, folder: str) -> dict[str, int]:
    """Documents under ``folder`` by status: ``{"ok": N, "failed": M}``."""
    prefix = path_to_uri(folder.rstrip("/")) + "/"  # by URI: see Catalog.files_under
    rows = coll.catalog.db.execute(
        "SELECT status, count(*) FROM docs WHERE uri >= ? AND uri < ? GROUP BY status", (prefix, prefix[:-1] + "0"))
    counts = {"ok": 0, "failed": 0}
    counts.update(dict(rows))
    return counts


class Cluster(TypedDict):
    """One cluster of the dups op's answer (docs/protocol.md)."""

    id: int
    # {uri, path, size, mtime, relation, similarity, identical_to}: the original first (index/originals.py)
    documents: list[dict[str, Any]]
    reclaimable: int  # bytes: the identical copies only


# How each other document of a cluster relates to its original, and the order they are listed in.
RELATIONS = ("original", "identical", "same_text", "other_format", "similar")


def clusters(coll: Collection) -> dict[str, Any]:
    """Clusters largest first, each with its documents, the original first, and the bytes deleting
    the identical copies would free. Only files with the same bytes (the same raw checksum) are
    identical; a document with the same words in the same or another format, or a near-duplicate,
    is not a copy and frees nothing (deleting it loses a format, or an edit)."""
    db = coll.catalog.db
    groups: dict[int, list[dict[str, Any]]] = {}
    for cluster, doc, uri, path, size, mtime, source, raw, text, mime in db.execute(
            "SELECT cluster, id, uri, path, size, mtime, source, raw_sum, text_sum, mime FROM docs "
            "WHERE cluster IS NOT NULL ORDER BY cluster, uri"):
        groups.setdefault(cluster, []).append({"id": doc, "uri": uri, "path": path, "size": size, "mtime": mtime,
                                               "source": source, "raw": raw, "text": text, "mime": mime})
    out: list[Cluster] = []
    for cid, docs in groups.items():
        if len(docs) >= 2:
            out.append(_cluster(db, cid, docs))
    out.sort(key=lambda c: (-len(c["documents"]), -c["reclaimable"], c["id"]))
    return {"clusters": out, "reclaimable": sum(c["reclaimable"] for c in out)}


def _cluster(db: sqlite3.Connection, cid: int, docs: list[dict[str, Any]]) -> Cluster:
    docs.sort(key=lambda d: originality(d["uri"], d["path"], d["mtime"]))
    original = docs[0]
    first_of: dict[str, dict[str, Any]] = {}  # raw checksum -> the first file listed with those bytes
    reclaim = 0
    shown = []
    for d in docs:
        raw = _exact_bytes(d)
        twin = first_of.setdefault(raw, d) if raw is not None else d
        if d is original:
            relation, similarity = "original", 1.0
        elif twin is not d:
            relation, similarity = "identical", 1.0
            reclaim += d["size"]
        elif d["text"] is not None and d["text"] == original["text"]:
            relation, similarity = ("same_text" if d["mime"] == original["mime"] else "other_format"), 1.0
        else:
            relation, similarity = "similar", _similarity(db, original["id"], d["id"])
        shown.append({"uri": d["uri"], "path": d["path"], "size": d["size"], "mtime": d["mtime"],
                      "relation": relation, "similarity": round(similarity, 3),
                      "identical_to": twin["uri"] if relation == "identical" else None})
    return {"id": cid, "documents": shown[:1] + _listed(shown[1:], original["uri"]), "reclaimable": reclaim}


def _listed(docs: list[dict[str, Any]], original: str) -> list[dict[str, Any]]:
    """The others by relation to the original, the most similar first; a copy of another of them
    right after it."""
    def own(d: dict[str, Any]) -> tuple[int, float, str]:
        return RELATIONS.index(d["relation"]), -d["similarity"], d["uri"]

    by_uri = {d["uri"]: d for d in docs}

    def key(d: dict[str, Any]) -> tuple[tuple[int, float, str], int, str]:
        twin = by_uri.get(d["identical_to"] or original)
        return (own(twin), 1, d["uri"]) if twin is not None else (own(d), 0, "")
    return sorted(docs, key=key)


def _exact_bytes(d: dict[str, Any]) -> str | None:
    """The checksum of all of a file's bytes; None for an archive member or a web page (nothing to
    delete alone) and for a file over the size limit (its checksum samples the file: "~...")."""
    raw = d["raw"]
    if d["source"] != "files" or "#" in d["uri"] or not raw or raw.startswith("~"):
        return None
    return str(raw)


def _similarity(db: sqlite3.Connection, a: int, b: int) -> float:
    """The share of fingerprints two documents have in common (index/fingerprints.py)."""
    try:
        blobs = dict(db.execute("SELECT doc, fps FROM dup_docs WHERE doc IN (?, ?)", (a, b)))
    except sqlite3.OperationalError:  # no duplicate tables
        return 0.0
    return fpr.similarity(fpr.from_blob(blobs.get(a)), fpr.from_blob(blobs.get(b)))
