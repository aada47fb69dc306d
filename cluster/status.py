"""``deskdex status`` of a cluster: the workers that answer, the tasks queued (conversions, of up to
cluster.pool.BATCH_FILES files, and crawl requests per crawl queue) and those taken by a worker and
not yet acknowledged, read from the broker by whoever asks (no daemon needed)."""

from __future__ import annotations

from typing import Any

from .app import QUEUE, make_app
from .pool import BATCH_FILES, shown_url
from .queues import CRAWL_QUEUES, crawl_queue_name
from .redeliver import UNACKED

PING_SECONDS = 1.0  # a worker busy converting answers between two files; an idle one at once


# The visibility timeout of the Celery app status pings the workers with. A kombu consumer gives
# back, whenever it waits, every task taken longer ago than its visibility timeout, whoever holds
# it: made with the home's redelivery (3 s in a test), `deskdex status` put a live worker's task
# back in the queue, to be converted twice. Status looks and gives nothing back: that is the
# coordinator's (cluster/redeliver.py) and the workers' own.
NEVER_RESTORE = 10.0 ** 9


def cluster_status(broker: str) -> dict[str, Any]:
    import redis

    out: dict[str, Any] = {"broker": shown_url(broker)}
    try:
        client = redis.Redis.from_url(broker, socket_connect_timeout=2, socket_timeout=5)
        out["queued"] = int(client.llen(QUEUE))
        out["crawl_queued"] = {str(k): int(client.llen(crawl_queue_name(k))) for k in range(CRAWL_QUEUES)}
        out["taken"] = _taken(client.hvals(UNACKED))
        client.close()
        app = make_app(broker, NEVER_RESTORE)
        try:
            replies = app.control.ping(timeout=PING_SECONDS) or []
        finally:
            app.close()
    except Exception as exc:  # redis-py's and kombu's connection errors alike
        out["error"] = f"unreachable: {exc}"
        return out
    out["workers"] = sorted(name for reply in replies for name in reply)
    return out


def _taken(held: list[bytes | str]) -> dict[str, int]:
    """Tasks taken and not yet acknowledged, per queue: kombu keeps each as [message, exchange,
    routing key]; one it cannot read counts under "?"."""
    import json

    out: dict[str, int] = {}
    for raw in held:
        try:
            queue = str(json.loads(raw)[2])
        except (ValueError, IndexError, TypeError):
            queue = "?"
        out[queue] = out.get(queue, 0) + 1
    return out


def describe(info: dict[str, Any]) -> str:
    """One line for people."""
    if "error" in info:
        return f"{info['broker']} {info['error']}"
    names = ", ".join(info["workers"]) or "none answering (deskdex worker --broker ...)"
    crawl = info["crawl_queued"]
    per_queue = ", ".join(f"queue {k}: {n}" for k, n in crawl.items() if n)
    return (f"{info['broker']}: workers {names}; {info['queued']} conversion tasks queued (up to {BATCH_FILES} "
            f"files a task), {sum(crawl.values())} crawl requests queued{f' ({per_queue})' if per_queue else ''}, "
            f"{sum(info['taken'].values())} tasks taken{_per_queue(info['taken'])}")


def _per_queue(taken: dict[str, int]) -> str:
    return f" ({', '.join(f'{q}: {n}' for q, n in sorted(taken.items()))})" if taken else ""
