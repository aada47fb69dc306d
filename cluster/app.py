"""The Celery application of both sides, and the worker's task: convert one file, send back what
became of it.

Delivery (Celery with Redis, ../shared/notes/libraries.md): a task is acknowledged only after its
result has been pushed (``task_acks_late``), a worker takes one task beyond those it runs
(``worker_prefetch_multiplier=1``), and a task taken by a worker that died goes to another after
``redelivery`` seconds (Redis's visibility timeout; the default of an hour would hold a killed
worker's file that long). A task may therefore run twice; the coordinator takes the first result
and drops the second (cluster/pool.py), so a document is never doubled.

Results do not go through Celery's result backend: the coordinator waits for whichever of its many
files comes back first, which a result backend answers only by polling each task. Each coordinator
names a Redis list in its tasks (``reply``) and blocks on it; a worker pushes the result there
before it acknowledges the task.

The worker converts as the desktop does: each of its threads keeps a converters.isolation
WorkerPool of one process, so a hostile file kills a converter process, never the worker, and its
file comes back with a reason like any other failure. The limits are the coordinator's (sent with
each file), so a file gets the same document wherever it is converted; the converters are the
worker's own (its ``converters`` setting): a message names no code to run."""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from celery import Celery

from deskdex.converters.convert import Outcome
from deskdex.errors import UnreadableFile
from deskdex.paths import at_or_under

from . import wire

if TYPE_CHECKING:
    import redis

    from deskdex.converters.isolation import WorkerPool
    from deskdex.converters.limits import Limits
    from deskdex.converters.source import Source
    from deskdex.settings import Config

logger = logging.getLogger(__name__)

TASK = "deskdex.convert"
QUEUE = "deskdex.convert"
REPLY_TTL = 3600  # seconds a reply list outlives its last push: a coordinator gone for good leaves no list behind
ENRICH = "deskdex.index.features:enrich"  # duplicate features, computed beside the conversion as locally


def make_app(broker: str, redelivery: float) -> Celery:
    app = Celery("deskdex", broker=broker, set_as_current=False)
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        task_default_queue=QUEUE,
        broker_transport_options={
            "visibility_timeout": redelivery,
            # Look for a dead worker's tasks often enough that redelivery is what decides when they come back.
            "unacked_restore_interval": max(1.0, min(10.0, redelivery / 4)),
            "unacked_restore_throttle": 1,
        },
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        task_send_sent_event=False,
    )
    app.task(name=TASK, bind=True)(_convert)
    return app


class _WorkerState:
    """What the task needs on a worker: a Redis client for replies, and one converter pool per
    thread for the limits last asked for."""

    def __init__(self) -> None:
        self.redis: redis.Redis | None = None
        self.overrides: dict[str, str] | None = None
        self.roots: list[str] = []  # the worker's setting ``folders``: only files under them are read
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
        from deskdex.converters.isolation import WorkerPool

        held: tuple[Limits, WorkerPool] | None = getattr(self._local, "pool", None)
        if held is not None and held[0] == limits:
            return held[1]
        if held is not None:
            held[1].close()
        pool = WorkerPool(1, limits, idle=True, overrides=self.overrides, enrich=ENRICH)
        self._local.pool = (limits, pool)
        return pool


_STATE = _WorkerState()


def _convert(task: Any, sources: list[dict[str, Any]], limits: dict[str, Any], reply: str) -> None:
    """Convert a batch of files, pushing each one's result as it is done: the coordinator stores
    it at once, and a redelivered batch only repeats files whose results it will drop."""
    try:
        batch = [wire.source_from_wire(s) for s in sources]
        lim = wire.limits_from_wire(limits)
    except wire.BadMessage as exc:
        logger.error("dropped a task that is not deskdex's: %s", exc)  # acknowledged: it can never succeed
        return
    ids = {src.uri: f"{task.request.id}:{i}" for i, src in enumerate(batch)}  # as the coordinator numbers them
    allowed = []
    for src in batch:
        if _STATE.may_read(src):
            allowed.append(src)
        else:
            _push(reply, ids[src.uri], [Outcome(src.uri, reason=UnreadableFile.reason,
                                                message=f"outside the folders this worker converts (its setting "
                                                        f"folders): {src.path}")])
    for src, outcomes in _STATE.pool(lim).map(allowed):
        _push(reply, ids[src.uri], outcomes)


def _push(reply: str, key: str, outcomes: list[Outcome]) -> None:
    assert _STATE.redis is not None
    body = json.dumps({"id": key, "outcomes": wire.outcomes_to_wire(outcomes)})
    pipe = _STATE.redis.pipeline()
    pipe.rpush(reply, body)
    pipe.expire(reply, REPLY_TTL)
    pipe.execute()


def run_worker(cfg: Config, broker: str, concurrency: int, name: str | None = None, verbose: bool = False) -> int:
    """``deskdex worker``: convert files for any coordinator of ``broker`` until stopped (Ctrl-C or
    SIGTERM: Celery's warm shutdown, the files under way finished). Returns the exit code. Two
    lines a file (received, succeeded) only with ``verbose``: a worker converts millions."""
    import socket

    import redis

    if not verbose:
        for noisy in ("celery.worker.strategy", "celery.app.trace"):
            logging.getLogger(noisy).setLevel(logging.WARNING)

    _STATE.redis = redis.Redis.from_url(broker)
    _STATE.overrides = cfg["converters"]
    _STATE.roots = [os.path.realpath(f) for f in cfg.configured_folders()]
    app = make_app(broker, float(cfg["redelivery"]))
    worker = app.Worker(pool="threads", concurrency=concurrency, queues=[QUEUE],
                        hostname=name or f"deskdex@{socket.gethostname()}.{os.getpid()}",
                        without_gossip=True, without_mingle=True, without_heartbeat=True,
                        loglevel="DEBUG" if verbose else "INFO", quiet=True)
    worker.start()
    return int(worker.exitcode or 0)
