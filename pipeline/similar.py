"""``deskdex dups FILE``: the near-duplicates of one file, indexed or not."""

from __future__ import annotations

from typing import Any

from deskdex.converters import Document, Limits, Source, WorkerPool
from deskdex.index import Collection


def convert_one(path: str, limits: Limits = Limits()) -> Document | str:
    """``path`` converted in an isolated worker under ``limits``, or why it could not be."""
    with WorkerPool(1, limits, idle=False) as pool:
        outcome = next(iter(pool.map([Source.from_path(path)])))[1][0]
    return outcome.document if outcome.document is not None else f"{outcome.reason}: {outcome.message}"


def near_duplicates(coll: Collection, path: str, doc: Document | str) -> dict[str, Any]:
    """What ``deskdex dups FILE`` shows for ``doc`` (``convert_one(path)``), the file itself left out."""
    if isinstance(doc, str):
        return {"duplicates": [], "error": doc}
    me = Source.from_path(path).uri
    return {"duplicates": [{"uri": row.uri, "path": row.path, "similarity": round(similarity, 3)}
                           for row, similarity in coll.near(doc) if row.uri != me]}
