"""What a worker process keeps for its tasks (cluster/app.py's conversions, cluster/fetching.py's
requests): the Redis client replies go through, its own limits on what it reads and on what a
conversion may cost, and one converter pool per thread."""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from typing import TYPE_CHECKING

from deskdex import wire
from deskdex.converters import Limits, OcrOptions
from deskdex.webcrawl import FetchSettings

from .beneath import descriptor_source, open_beneath

if TYPE_CHECKING:
    import redis

    from deskdex.converters import Source, WorkerPool

logger = logging.getLogger(__name__)

REPLY_PREFIX = wire.REPLY_PREFIX  # the lists coordinators wait on: a task names one, and no other key
# A worker says, every ALIVE_EVERY seconds, which tasks it holds (running or waiting their turn):
# a coordinator gives back only a task nobody says so of (cluster/redeliver.py), so that a slow
# file on a live worker is not converted twice, and a dead worker's come back ALIVE_TTL s at most
# after its death, or the coordinator's redelivery if that is longer.
ALIVE_PREFIX = "deskdex:alive:"
ALIVE_EVERY = 1.0
ALIVE_TTL = 5
REPLY_TTL = 3600  # seconds a reply list outlives its last push: a coordinator gone for good leaves no list behind
ENRICH = "deskdex.index.features:enrich"  # duplicate features, computed beside the conversion as locally


class WorkerState:
    def __init__(self) -> None:
        self.redis: redis.Redis | None = None
        self.overrides: dict[str, str] | None = None
        # The worker's setting ``folders`` (as written and resolved): only files beneath them are read.
        self.roots: list[str] = []
        self.allow_private = False  # deskdex worker --allow-private: fetch private addresses if asked to
        self.limits = Limits()  # the worker's own (its settings): a task may lower them, never raise them
        self.fetch = FetchSettings()  # and a crawl request's time and size limits (its crawl.* settings)
        self._local = threading.local()

    def set_folders(self, folders: list[str]) -> None:
        """The setting ``folders``: each as written (its own path is trusted, links and all) and resolved."""
        roots = [os.path.abspath(f) for f in folders] + [os.path.realpath(f) for f in folders]
        self.roots = list(dict.fromkeys(roots))

    def open_source(self, source: Source) -> tuple[Source, int | None]:
        """What to convert for ``source``, and the descriptor to close once it is converted. A worker
        with folders opens the file itself, beneath them, following no link (cluster/beneath.py), and
        its converter reads that descriptor; without folders (any file its account may read) or for
        bytes sent in the message, ``source`` as it is. Raises UnreadableFile saying why it is refused."""
        if not self.roots or source.path is None:
            return source, None
        fd = open_beneath(self.roots, source.path)
        try:
            return descriptor_source(source, fd, self.limits.file_bytes), fd
        except BaseException:
            os.close(fd)
            raise

    def capped(self, asked: Limits) -> Limits:
        """The limits a task asks for, none above the worker's own: whoever can write to the broker
        may lower them (the coordinator's settings), never raise what this machine allows."""
        return lowered(asked, self.limits)

    def pool(self, limits: Limits) -> WorkerPool:
        """This thread's converter pool, for ``limits`` (a pool for other limits is closed)."""
        from deskdex.converters import WorkerPool

        held: tuple[Limits, WorkerPool] | None = getattr(self._local, "pool", None)
        if held is not None and held[0] == limits:
            return held[1]
        if held is not None:
            held[1].close()
        pool = WorkerPool(1, limits, idle=True, overrides=self.overrides, enrich=ENRICH)
        self._local.pool = (limits, pool)
        return pool


STATE = WorkerState()


def lowered(asked: Limits, own: Limits) -> Limits:
    """Each of ``asked``'s limits, or ``own``'s where that is stricter. A memory limit of 0 is none
    at all (converters/isolation.py), so it is the loosest; OCR runs only if both allow it, reads
    only images both find large enough, in the languages asked."""
    def mem(n: int) -> float:
        return n if n > 0 else float("inf")

    ocr = OcrOptions(enabled=asked.ocr.enabled and own.ocr.enabled, languages=asked.ocr.languages,
                     min_pixels=max(asked.ocr.min_pixels, own.ocr.min_pixels),
                     seconds=min(asked.ocr.seconds, own.ocr.seconds))
    return dataclasses.replace(
        asked, time_seconds=min(asked.time_seconds, own.time_seconds),
        memory_bytes=asked.memory_bytes if mem(asked.memory_bytes) <= mem(own.memory_bytes) else own.memory_bytes,
        file_bytes=min(asked.file_bytes, own.file_bytes), text_chars=min(asked.text_chars, own.text_chars),
        depth=min(asked.depth, own.depth), members=min(asked.members, own.members),
        member_bytes=min(asked.member_bytes, own.member_bytes),
        expansion_ratio=min(asked.expansion_ratio, own.expansion_ratio), ocr=ocr)


def keep_alive(stop: threading.Event) -> None:
    """Until ``stop``: say which tasks this worker holds (see ALIVE_PREFIX). A broker out of reach
    is Celery's to wait for: the next round says it again."""
    import redis
    from celery.worker import state

    assert STATE.redis is not None
    while not stop.wait(ALIVE_EVERY):
        try:
            held = [request.id for request in list(state.reserved_requests)]  # running or waiting
        except RuntimeError:  # the set changed while it was read: next round
            continue
        if not held:
            continue
        try:
            pipe = STATE.redis.pipeline(transaction=False)
            for task in held:
                pipe.set(ALIVE_PREFIX + task, b"1", ex=ALIVE_TTL)
            pipe.execute()
        except redis.RedisError as exc:
            logger.debug("could not say which tasks this worker holds: %s", exc)


def push(reply: str, message: wire.ConvertResult | wire.FetchResult) -> None:
    """Send ``message`` to the coordinator waiting on the list ``reply``."""
    assert STATE.redis is not None
    pipe = STATE.redis.pipeline()
    pipe.rpush(reply, wire.encode(message))
    pipe.expire(reply, REPLY_TTL)
    pipe.execute()
