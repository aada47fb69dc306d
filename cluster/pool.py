"""The coordinator's side: converters.isolation.WorkerPool's ``map`` over the broker, for the
indexer, which keeps the one writer and everything it does (checksums, copies, the catalog, the
index) on this machine. Only the conversion, the costly part, goes to the workers."""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from deskdex import wire as schemas
from deskdex.converters import Outcome
from deskdex.errors import BrokerUnavailable, ConverterCrashed

from . import wire
from .app import QUEUE, TASK, make_app
from .redeliver import Redelivery
from .worker import REPLY_PREFIX

if TYPE_CHECKING:
    from deskdex.converters import Limits, Source

logger = logging.getLogger(__name__)

# Files in one task: Celery and Redis cost about 2 ms a task (211 files/s through one worker with a
# task a file, 432 with 16), more than a small note's conversion; a batch stops at BATCH_BYTES, so
# that large files still spread over the workers.
BATCH_FILES = 16
BATCH_BYTES = 1 << 20
# Files out at once: 32 tasks, one running and one waiting for each of 16 worker threads (a worker
# takes one task beyond those it runs); few enough that a coordinator that stops leaves little
# converted for nothing.
WINDOW = 32 * BATCH_FILES
# Times a file is sent before it is recorded as a crash: a Redis restarted without persistence
# loses its queue, and a file sent again after a silence costs one more conversion at most.
ATTEMPTS = 3


class RemotePool:
    def __init__(self, broker: str, limits: Limits, redelivery: float, window: int = WINDOW) -> None:
        import redis

        self.broker = broker
        self.limits = limits
        self.window = window
        # No reply for this long while files are out (the queue has not moved): the oldest is sent
        # again. Past the conversion's own limit and a dead worker's redelivery, with a margin.
        self.silence = limits.time_seconds + redelivery + 30.0
        self.redelivery = redelivery
        self._app = make_app(broker, redelivery)
        self._redis = redis.Redis.from_url(broker, socket_connect_timeout=5)
        self._reply = f"{REPLY_PREFIX}{uuid.uuid4().hex}"
        self._limits = wire.limits_to_wire(limits)

    def pids(self) -> list[int]:
        return []  # no process of this machine converts

    def close(self) -> None:
        import redis

        try:
            self._redis.delete(self._reply)  # late replies to files given up recreate it, for REPLY_TTL
            self._redis.close()
        except redis.RedisError:
            pass
        self._app.close()  # its connections to the broker: a daemon makes a pool each time it has work

    def _send(self, batch: list[Source], tasks: Redelivery) -> list[str]:
        """Queue ``batch`` as one task; the ids its files' results come back with."""
        tid = uuid.uuid4().hex
        try:
            self._app.send_task(TASK, args=[[wire.source_to_wire(s) for s in batch], self._limits, self._reply],
                                task_id=tid, queue=QUEUE)
        except Exception as exc:  # kombu's OperationalError and the transport's own errors
            raise BrokerUnavailable(f"cannot queue files on the broker {shown_url(self.broker)}: {exc}") from exc
        tasks.sent(tid)
        return [f"{tid}:{i}" for i in range(len(batch))]

    def map(self, sources: Iterable[Source], stop: threading.Event | None = None
            ) -> Iterator[tuple[Source, list[Outcome]]]:
        """Convert every source on the workers; yields (source, outcomes) in completion order.
        With ``stop`` set, the files out are abandoned (a worker converts them for nothing) and
        the iteration ends."""
        import redis

        todo = iter(sources)
        out: OrderedDict[str, tuple[Source, int]] = OrderedDict()  # file id -> (source, attempt), oldest first
        tasks = Redelivery(self._redis, QUEUE, self.redelivery)  # this setting, not the workers', governs
        exhausted = False
        last_news = time.monotonic()
        while True:
            # A new batch once a whole one fits: sent as each file came back, batches would be of one.
            while not exhausted and len(out) + BATCH_FILES <= self.window:
                batch: list[Source] = []
                size = 0
                while len(batch) < BATCH_FILES and size < BATCH_BYTES:
                    source = next(todo, None)
                    if source is None:
                        exhausted = True
                        break
                    batch.append(source)
                    size += _size(source)
                if batch:
                    if not out:
                        last_news = time.monotonic()
                    out.update(zip(self._send(batch, tasks), ((s, 1) for s in batch)))
            if not out:
                return
            if stop is not None and stop.is_set():
                return
            try:
                tasks.look()
                item = self._redis.blpop([self._reply], timeout=0.25 if stop is not None else 1.0)
            except redis.RedisError as exc:
                raise BrokerUnavailable(f"lost the broker {shown_url(self.broker)}: {exc}") from exc
            if item is not None:
                try:
                    fid = schemas.decode(item[1], schemas.ResultId, "not a worker's result").id
                except wire.BadMessage as exc:
                    logger.error("dropped a reply that is not a worker's: %s", exc)
                    continue
                entry = out.pop(fid, None)
                if entry is None:
                    continue  # a second delivery's result, or one for a file given up
                tid = fid.partition(":")[0]
                if any(k.startswith(tid + ":") for k in out):
                    tasks.heard(tid)  # its worker is alive: its other files are not given back
                else:
                    tasks.done(tid)
                try:
                    msg = schemas.decode(item[1], schemas.ConvertResult, "not a worker's result")
                    outcomes = wire.outcomes_from_messages(msg.outcomes)
                except wire.BadMessage as exc:
                    # The file is no longer waited for: it fails by name (and is retried like a crashed
                    # conversion) rather than vanish from the index without a word.
                    logger.error("a worker's result for %s could not be read: %s", entry[0].uri, exc)
                    outcomes = [Outcome(entry[0].uri, reason=ConverterCrashed.reason,
                                        message=f"the worker's result could not be read: {exc}")]
                last_news = time.monotonic()
                yield entry[0], outcomes
                continue
            if time.monotonic() - last_news < self.silence:
                continue
            fid, (source, attempt) = out.popitem(last=False)
            last_news = time.monotonic()
            if attempt < ATTEMPTS:
                logger.warning("no worker answered for %s in %.0f s: sent again", source.uri, self.silence)
                out[self._send([source], tasks)[0]] = (source, attempt + 1)
            else:
                yield source, [Outcome(source.uri, reason=ConverterCrashed.reason,
                                       message=f"no deskdex worker converted it ({ATTEMPTS} tries, "
                                               f"{self.silence:.0f} s each): is one running?")]


def _size(source: Source) -> int:
    if source.data is not None:
        return len(source.data)
    try:
        return os.stat(source.path or "").st_size
    except OSError:
        return 0  # the worker says what became of it


def shown_url(url: str) -> str:
    """A broker URL without its password, for messages and logs."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
