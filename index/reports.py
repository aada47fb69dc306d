"""What the clients show about the collection, read from the catalog: failures, documents per
watched folder, and duplicate clusters with the space deleting the extra copies would free."""

from __future__ import annotations

from typing import Any, TypedDict

from deskdex.converters.source import path_to_uri

from .collection import Collection


def failures(coll: Collection) -> list[dict[str, Any]]:
    """Every file that failed to convert, with its reason and message, and for a failure that may
    pass another time, the failed attempts so far and when it is tried again (``retry_at``, seconds
    since the epoch; null: when the file changes)."""
    return [{"path": r.path, "uri": r.uri, "reason": r.reason, "message": r.error, "attempts": r.attempts,
             "retry_at": r.retry_at} for r in coll.catalog.rows("status='failed'")]


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
    documents: list[dict[str, Any]]  # {uri, path, size}, largest first
    reclaimable: int  # bytes


def clusters(coll: Collection) -> dict[str, Any]:
    """Clusters largest first, each with its documents and the bytes deleting all but one would free."""
    groups: dict[int, list[dict[str, Any]]] = {}
    for cluster, uri, path, size in coll.catalog.db.execute(
            "SELECT cluster, uri, path, size FROM docs WHERE cluster IS NOT NULL ORDER BY cluster, size DESC, uri"):
        groups.setdefault(cluster, []).append({"uri": uri, "path": path, "size": size})
    out: list[Cluster] = []
    for cid, docs in groups.items():
        if len(docs) < 2:
            continue
        files = [d["size"] for d in docs if "#" not in d["uri"]]  # a member cannot be deleted alone
        reclaim = sum(files) - max(files) if len(files) > 1 else 0
        out.append({"id": cid, "documents": docs, "reclaimable": reclaim})
    out.sort(key=lambda c: (-len(c["documents"]), -c["reclaimable"], c["id"]))
    return {"clusters": out, "reclaimable": sum(c["reclaimable"] for c in out)}
