"""The coordinator's ``redelivery``: a task a worker took and went silent on is queued again after
the coordinator's setting, whatever the worker's.

Redis gives back a dead worker's tasks only through the workers that remain: each looks, with its
own ``redelivery`` (kombu's visibility timeout), for tasks taken and never acknowledged. A worker
started with the default (300 s) held a killed worker's files five minutes, whatever the
coordinator asked. So the coordinator looks too, at its own tasks only: one taken by a worker (in
kombu's ``unacked`` hash) from which no file's result came for ``redelivery`` seconds, and that no
live worker says it holds (cluster/worker.py's ALIVE_PREFIX keys, which a dead worker's lose within
ALIVE_TTL seconds), is put back at the head of its queue, as kombu would, and whichever worker
takes it converts it; a result of the first delivery that still comes is dropped like any second
one (cluster/pool.py).

The time a task was taken is the time this coordinator first saw it taken (checked every
``redelivery`` / 4 s at most), not the worker's clock, which may be another machine's."""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING

from .worker import ALIVE_PREFIX

if TYPE_CHECKING:
    import redis

logger = logging.getLogger(__name__)

# kombu's Redis transport keeps the messages taken and not yet acknowledged in these: the message
# by its delivery tag, and when it was taken.
UNACKED = "unacked"
UNACKED_INDEX = "unacked_index"

# Put back only what is still unacknowledged: a worker that acknowledges meanwhile wins, and a
# task is never queued twice by two who look at once (another coordinator, a worker's own restore).
_RESTORE = """
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('hdel', KEYS[1], ARGV[1])
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('rpush', KEYS[3], ARGV[2])
return 1
"""


class Redelivery:
    """The tasks one coordinator has out: when each was sent, first seen taken, last heard of."""

    def __init__(self, client: redis.Redis, queue: str, redelivery: float) -> None:
        self.redelivery = redelivery
        self.every = max(0.5, min(10.0, redelivery / 4))
        self._client = client
        self._queue = queue
        self._news: dict[str, float] = {}  # task id -> last news (sent, seen taken, a file's result)
        self._taken: set[str] = set()
        self._last_look = time.monotonic()
        self._restore = client.register_script(_RESTORE)
        self.requeued = 0

    def sent(self, task: str) -> None:
        self._news[task] = time.monotonic()

    def heard(self, task: str) -> None:
        if task in self._news:
            self._news[task] = time.monotonic()

    def done(self, task: str) -> None:
        self._news.pop(task, None)
        self._taken.discard(task)

    def look(self) -> int:
        """Every ``every`` seconds: put back the tasks taken and silent for ``redelivery``; how many.
        Raises redis.RedisError."""
        now = time.monotonic()
        if not self._news or now - self._last_look < self.every:
            return 0
        self._last_look = now
        put_back = 0
        for tag, raw in self._client.hgetall(UNACKED).items():
            try:
                payload, _exchange, routing_key = json.loads(raw)
                task = str(payload["headers"]["id"])
            except (ValueError, TypeError, KeyError):
                continue  # not a task of ours (the worker's transport sets aside what is not a task)
            if task not in self._news or routing_key != self._queue:
                continue
            if task not in self._taken:
                self._taken.add(task)
                self._news[task] = now  # the silence counts from when it was taken, not sent
                continue
            if now - self._news[task] < self.redelivery:
                continue
            if self._client.exists(ALIVE_PREFIX + task):
                self._news[task] = now  # a live worker holds it, converting or about to: not given back
                continue
            props = payload.get("properties")
            for where in (payload.get("headers"), props.get("delivery_info") if isinstance(props, dict) else None):
                if isinstance(where, dict):
                    where["redelivered"] = True  # as kombu marks what it gives back
            if self._restore(keys=[UNACKED, UNACKED_INDEX, self._queue], args=[tag, json.dumps(payload)]):
                logger.warning("task %s was taken by a worker that has said nothing for %.0f s (setting "
                               "redelivery): queued again", task, now - self._news[task])
                put_back += 1
            self._taken.discard(task)
            self._news[task] = now
        self.requeued += put_back
        return put_back
