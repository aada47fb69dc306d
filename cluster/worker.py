"""What a worker process keeps for its tasks (cluster/app.py's conversions, cluster/fetching.py's
requests): the Redis client replies go through, its own limits on what it reads, and one converter
pool per thread."""

from __future__ import annotations

import json
import os
import threading
from typing import TYPE_CHECKING, Any

from deskdex.paths import at_or_under

if TYPE_CHECKING:
    import redis

    from deskdex.converters.isolation import WorkerPool
    from deskdex.converters.limits import Limits
    from deskdex.converters.source import Source

REPLY_TTL = 3600  # seconds a reply list outlives its last push: a coordinator gone for good leaves no list behind
ENRICH = "deskdex.index.features:enrich"  # duplicate features, computed beside the conversion as locally


class WorkerState:
    def __init__(self) -> None:
        self.redis: redis.Redis | None = None
        self.overrides: dict[str, str] | None = None
        self.roots: list[str] = []  # the worker's setting ``folders``: only files under them are read
        self.allow_private = False  # deskdex worker --allow-private: fetch private addresses if asked to
        self._local = threading.local()

    def may_read(self, source: Source) -> bool:
        """Whether the file ``source`` names lies under the worker's folders (any file, without
        them). Whoever can write to the broker names the paths a worker reads: a worker given
        folders reads nothing else, symbolic links resolved first."""
        if not self.roots or source.path is None:
            return True
        real = os.path.realpath(source.path)
        return any(at_or_under(real, root) for root in self.roots)

    def pool(self, limits: Limits) -> WorkerPool:
        """This thread's converter pool, for ``limits`` (a pool for other limits is closed)."""
        from deskdex.converters.isolation import WorkerPool

        held: tuple[Limits, WorkerPool] | None = getattr(self._local, "pool", None)
        if held is not None and held[0] == limits:
            return held[1]
        if held is not None:
            held[1].close()
        pool = WorkerPool(1, limits, idle=True, overrides=self.overrides, enrich=ENRICH)
        self._local.pool = (limits, pool)
        return pool


STATE = WorkerState()


def push(reply: str, message: dict[str, Any]) -> None:
    """Send ``message`` to the coordinator waiting on the list ``reply``."""
    assert STATE.redis is not None
    pipe = STATE.redis.pipeline()
    pipe.rpush(reply, json.dumps(message))
    pipe.expire(reply, REPLY_TTL)
    pipe.execute()
