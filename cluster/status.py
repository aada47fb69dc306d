"""``deskdex status`` of a cluster: the workers that answer, the tasks queued and those taken by a
worker and not yet acknowledged (a task is up to cluster.pool.BATCH_FILES files), read from the
broker by whoever asks (no daemon needed)."""

from __future__ import annotations

from typing import Any

from .app import QUEUE, make_app
from .pool import BATCH_FILES, shown_url

PING_SECONDS = 1.0  # a worker busy converting answers between two files; an idle one at once

# kombu's Redis transport keeps the messages taken and not yet acknowledged in this hash.
UNACKED = "unacked"


def cluster_status(broker: str, redelivery: float) -> dict[str, Any]:
    import redis

    out: dict[str, Any] = {"broker": shown_url(broker)}
    try:
        client = redis.Redis.from_url(broker, socket_connect_timeout=2, socket_timeout=5)
        out["queued"] = int(client.llen(QUEUE))
        out["taken"] = int(client.hlen(UNACKED))
        client.close()
        app = make_app(broker, redelivery)
        try:
            replies = app.control.ping(timeout=PING_SECONDS) or []
        finally:
            app.close()
    except Exception as exc:  # redis-py's and kombu's connection errors alike
        out["error"] = f"unreachable: {exc}"
        return out
    out["workers"] = sorted(name for reply in replies for name in reply)
    return out


def describe(info: dict[str, Any]) -> str:
    """One line for people."""
    if "error" in info:
        return f"{info['broker']} {info['error']}"
    names = ", ".join(info["workers"]) or "none answering (deskdex worker --broker ...)"
    return (f"{info['broker']}: workers {names}; {info['queued']} tasks queued, {info['taken']} taken "
            f"(up to {BATCH_FILES} files a task)")
