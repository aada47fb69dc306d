"""The worker's Redis transport: kombu's, except that a message it cannot take is set aside rather
than raised. Whoever can write to the broker can push anything on a worker's queues (``garbage``,
``null``, ``[]``, an envelope without its properties); kombu's transport raises on such a message
from the worker's event loop, and the worker process ends: each such message cost a restart.

Here a message that is not JSON, not an envelope kombu can read, or whose delivery raises (Celery
refusing it in a way it does not handle itself) is logged (what it is, why it was refused), pushed
on the list DEAD_LETTERS for whoever looks into it (the last DEAD_KEPT only), acknowledged, and the
worker goes on with the next message. Errors of the connection itself still go up, as before: they
are kombu's to retry."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from queue import Empty
from typing import Any

from kombu.transport import redis as kombu_redis
from kombu.utils.json import dumps

logger = logging.getLogger(__name__)

DEAD_LETTERS = "deskdex:dead-letters"
DEAD_KEPT = 1000
SHOWN = 200  # characters of a refused message in the log line
KEPT_BYTES = 64 * 1024  # of a refused message in DEAD_LETTERS


def envelope_problem(raw: Any) -> str | None:
    """Why ``raw`` (a message as kombu read it from JSON) is not an envelope kombu can deliver;
    None when it is one. Only what kombu's Message needs before Celery looks: Celery refuses what
    it cannot run (unknown task, a body it cannot decode) by itself."""
    if not isinstance(raw, dict):
        return f"a JSON {type(raw).__name__}, not a message envelope"
    props = raw.get("properties")
    if not isinstance(props, dict):
        return "no properties"
    if not isinstance(props.get("delivery_tag"), str):
        return "no delivery tag"
    if not isinstance(props.get("delivery_info", {}), dict):
        return "delivery_info is not an object"
    if props.get("body_encoding") not in (None, "base64"):
        return f"an unknown body encoding {props.get('body_encoding')!r}"
    if not isinstance(raw.get("body", ""), str):
        return "a body that is not a string"
    if not isinstance(raw.get("headers") or {}, dict):
        return "headers that are not an object"
    for key in ("content-type", "content-encoding"):
        if not isinstance(raw.get(key) or "", str):
            return f"a {key} that is not a string"
    return None


class Channel(kombu_redis.Channel):
    """kombu's Redis channel, setting aside the messages it cannot deliver (see the module)."""

    def _brpop_read(self, **options: Any) -> Any:
        try:
            return super()._brpop_read(**options)  # type: ignore[misc]  # kombu's, untyped
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            # Taken off the queue by BRPOP, then not decodable: it is ours alone to set aside.
            self.set_aside(_raw_of(exc), "a consumed queue", f"not JSON ({exc})")
            return True

    def _get(self, queue: str, timeout: float | None = None) -> Any:
        try:
            return super()._get(queue)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self.set_aside(_raw_of(exc), queue, f"not JSON ({exc})")
            raise Empty() from exc

    def basic_consume(self, queue: str, no_ack: bool, callback: Callable[..., Any] | None, consumer_tag: str | None,
                      **kwargs: Any) -> Any:
        result = super().basic_consume(queue, no_ack, callback, consumer_tag, **kwargs)
        callbacks = self.connection._callbacks  # what kombu's Transport._deliver calls, by queue
        assert callbacks is not None
        deliver = callbacks[queue]

        def guarded(raw: Any) -> Any:
            problem = envelope_problem(raw)
            if problem is not None:
                self.set_aside(raw, queue, problem)
                return None
            try:
                return deliver(raw)
            except self.connection.connection_errors:
                raise
            except Exception as exc:  # what Celery does not handle itself: it must not end the worker
                self.set_aside(raw, queue, f"{type(exc).__name__}: {exc}")
                if not no_ack:
                    self.qos.ack(raw["properties"]["delivery_tag"])  # taken: acknowledged, never redelivered
                return None

        callbacks[queue] = guarded
        return result

    def set_aside(self, raw: Any, queue: str, why: str) -> None:
        """Log a message refused (what, why) and push it on DEAD_LETTERS."""
        text = raw if isinstance(raw, str) else _json_or_repr(raw)
        logger.error("set aside a message from %s that is not deskdex's (%s): %.*s", queue, why, SHOWN, text)
        entry = dumps({"at": time.time(), "queue": queue, "why": why, "message": text[:KEPT_BYTES]})
        try:
            with self.conn_or_acquire() as client:
                client.pipeline().lpush(DEAD_LETTERS, entry).ltrim(DEAD_LETTERS, 0, DEAD_KEPT - 1).execute()
        except self.connection.connection_errors as exc:
            logger.warning("could not keep it in %s: %s", DEAD_LETTERS, exc)


class Transport(kombu_redis.Transport):
    Channel = Channel


def _raw_of(exc: ValueError) -> str:
    """The text of a message that failed to decode, from its decoding error."""
    if isinstance(exc, json.JSONDecodeError):
        return exc.doc
    if isinstance(exc, UnicodeDecodeError):
        return exc.object.decode("utf-8", "replace")
    return ""


def _json_or_repr(raw: Any) -> str:
    try:
        return json.dumps(raw)
    except (TypeError, ValueError):
        return repr(raw)
