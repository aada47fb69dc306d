"""The Celery application of both sides, and the worker's tasks: convert a batch of files, send back
what became of each; make one request of a crawl (cluster/fetching.py).

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

import logging
import os
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from celery import Celery

from deskdex import wire as schemas
from deskdex.converters import Limits, Outcome
from deskdex.errors import UnreadableFile
from deskdex.webcrawl import FetchSettings

from . import wire
from .broker import redis_client
from .fetching import fetch_task
from .queues import CRAWL_QUEUES, crawl_queue_name
from .worker import STATE, keep_alive, push

if TYPE_CHECKING:
    from deskdex.converters import Source
    from deskdex.settings import Config

logger = logging.getLogger(__name__)

TASK = "deskdex.convert"
QUEUE = "deskdex.convert"
FETCH_TASK = "deskdex.fetch"
# The worker's transport: kombu's Redis transport that sets aside a message it cannot take rather
# than end the worker (cluster/transport.py).
WORKER_TRANSPORT = "deskdex.cluster.transport:Transport"


def crawl_queue(site: str) -> str:
    """The queue of the crawl requests to ``site``."""
    from deskdex.webcrawl import shard_of

    return crawl_queue_name(shard_of(site, CRAWL_QUEUES))


def make_app(broker: str, redelivery: float, worker: bool = False) -> Celery:
    """The Celery application; ``worker``: a worker's, whose transport survives what it cannot take."""
    app = Celery("deskdex", broker=broker, set_as_current=False)
    if worker:
        app.conf.broker_transport = WORKER_TRANSPORT
        if broker.startswith("rediss:"):
            # kombu turns TLS on by the URL's scheme only with its own transport's name; with ours,
            # it is asked for here, verifying the server as the worker's own Redis client does.
            import ssl

            app.conf.broker_use_ssl = {"ssl_cert_reqs": ssl.CERT_REQUIRED}
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
    app.task(name=FETCH_TASK, bind=True)(fetch_task)
    return app


def _convert(task: Any, *args: Any, **kwargs: Any) -> None:
    """Convert a batch of files, pushing each one's result as it is done: the coordinator stores
    it at once, and a redelivered batch only repeats files whose results it will drop. A task
    that is not deskdex's (its arguments not deskdex.wire's ConvertArgs) is logged and dropped: it
    is acknowledged, since it can never succeed."""
    try:
        arg = schemas.arguments(args, kwargs, schemas.ConvertArgs, "not a task to convert")
        batch = [wire.source_from_message(s) for s in arg.sources]
        reply = arg.reply
        # The coordinator's limits, none above the worker's own (a task written by hand cannot raise them).
        lim = STATE.capped(wire.limits_from_wire(arg.limits))
    except wire.BadMessage as exc:
        logger.error("dropped task %s, which is not deskdex's: %s", task.request.id, exc)
        return
    ids = {src.uri: f"{task.request.id}:{i}" for i, src in enumerate(batch)}  # as the coordinator numbers them
    opened: dict[int, int] = {}  # id() of the Source handed to the pool -> the descriptor it reads

    def readable() -> Iterator[Source]:
        # Each file is opened when its converter is ready for it, not when the batch arrives:
        # what is converted is what was opened and checked (cluster/beneath.py).
        for src in batch:
            try:
                local, fd = STATE.open_source(src)
            except UnreadableFile as exc:
                logger.warning("refused %s: %s", src.uri, exc)
                push(reply, schemas.ConvertResult(ids[src.uri], wire.outcome_messages(
                    [Outcome(src.uri, reason=exc.reason, message=str(exc))])))
                continue
            if fd is not None:
                opened[id(local)] = fd
            yield local

    try:
        for local, outcomes in STATE.pool(lim).map(readable()):
            fd = opened.pop(id(local), None)
            if fd is not None:
                os.close(fd)
            push(reply, schemas.ConvertResult(ids[local.uri], wire.outcome_messages(outcomes)))
    finally:
        for fd in opened.values():
            os.close(fd)


def run_worker(cfg: Config, broker: str, concurrency: int, name: str | None = None, verbose: bool = False,
               crawl_queues: list[int] | None = None, allow_private: bool = False) -> int:
    """``deskdex worker``: convert files and make crawl requests (those of ``crawl_queues`` only,
    when given) for any coordinator of ``broker`` until stopped (Ctrl-C or SIGTERM: Celery's warm
    shutdown, the tasks under way finished). Returns the exit code. Two lines a task (received,
    succeeded) only with ``verbose``: a worker converts millions."""
    import socket

    if not verbose:
        for noisy in ("celery.worker.strategy", "celery.app.trace"):
            logging.getLogger(noisy).setLevel(logging.WARNING)

    STATE.redis = redis_client(broker)
    s = cfg.settings
    STATE.overrides = dict(s.converters)
    STATE.set_folders(cfg.configured_folders())
    STATE.allow_private = allow_private
    STATE.limits = Limits.from_settings(cfg)
    STATE.fetch = FetchSettings(timeout=s.crawl.timeout, deadline=s.crawl.deadline, max_bytes=s.crawl.max_mb * 2**20)
    crawls = range(CRAWL_QUEUES) if crawl_queues is None else crawl_queues
    app = make_app(broker, s.redelivery, worker=True)
    worker = app.Worker(pool="threads", concurrency=concurrency,
                        queues=[QUEUE, *(crawl_queue_name(k) for k in crawls)],
                        hostname=name or f"deskdex@{socket.gethostname()}.{os.getpid()}",
                        without_gossip=True, without_mingle=True, without_heartbeat=True,
                        loglevel="DEBUG" if verbose else "INFO", quiet=True)
    stop = threading.Event()
    alive = threading.Thread(target=keep_alive, args=(stop,), name="deskdex-alive", daemon=True)
    alive.start()
    try:
        worker.start()
    finally:
        stop.set()
        alive.join()
    return int(worker.exitcode or 0)
