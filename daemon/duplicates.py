"""What ``deskdex dups`` shows: every duplicate cluster, or the near-duplicates of one file."""

from __future__ import annotations

from typing import Any

from converters import Source
from converters.isolation import WorkerPool
from index import Collection


def clusters(coll: Collection) -> dict[str, Any]:
    """Clusters largest first, each with its documents and the bytes deleting all but one would free."""
    groups: dict[int, list[dict[str, Any]]] = {}
    for cluster, uri, path, size in coll.catalog.db.execute(
            "SELECT cluster, uri, path, size FROM docs WHERE cluster IS NOT NULL ORDER BY cluster, size DESC, uri"):
        groups.setdefault(cluster, []).append({"uri": uri, "path": path, "size": size})
    out = []
    for cid, docs in groups.items():
        if len(docs) < 2:
            continue
        files = [d["size"] for d in docs if "#" not in d["uri"]]  # a member cannot be deleted alone
        reclaim = sum(files) - max(files) if len(files) > 1 else 0
        out.append({"id": cid, "documents": docs, "reclaimable": reclaim})
    out.sort(key=lambda c: (-len(c["documents"]), -c["reclaimable"], c["id"]))
    return {"clusters": out, "reclaimable": sum(c["reclaimable"] for c in out)}


def near_duplicates(coll: Collection, path: str) -> dict[str, Any]:
    """Near-duplicates of a file, indexed or not, converted in an isolated worker."""
    with WorkerPool(1, idle=False) as pool:
        outcomes = next(iter(pool.map([Source.from_path(path)])))[1]
    doc = outcomes[0].document
    if doc is None:
        return {"duplicates": [], "error": f"{outcomes[0].reason}: {outcomes[0].message}"}
    me = Source.from_path(path).uri
    found = []
    for doc_id, similarity in coll.dups.near(doc.body_text(), doc.body_text(boilerplate=True)):
        row = coll.catalog.row_by_id(doc_id)
        if row is not None and row.uri != me:
            found.append({"uri": row.uri, "path": row.path, "similarity": round(similarity, 3)})
    return {"duplicates": found}
