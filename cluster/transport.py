"""The worker's Redis transport: kombu's, except that a message it cannot take is set aside rather
than raised. Whoever can write to the broker can push anything on a worker's queues (``garbage``,
``null``, ``[]``, an envelope without its properties); kombu's transport raises on such a message
from the worker's event loop, and the worker process ends: each such message cost a restart.

Here a message that is not JSON, not an envelope kombu can read, or whose delivery raises (Celery
refusing it in a way it does not handle itself) is logged (what it is, why it was refused), pushed
on the list DEAD_LETTERS for whoever looks into it (the last DEAD_KEPT only), acknowledged, and the
worker goes on with the next message. Errors of the connection itself still go up, as before: they
are kombu's to retry.

Only public interfaces are used, none of kombu's private methods: every Redis client of the
channel (its ``Client``, and the ``client`` kombu made while it started) gets a response callback
(redis-py's ``set_response_callback``) for BRPOP and RPOP, the two commands that take a message off
a queue, which screens the message before kombu decodes it; a message refused there reads as an
empty queue to kombu. What Celery raises on a message is caught around the ``callback`` given to
``basic_consume``, and the message acknowledged with its own ``ack``."""

from __future__ import annotations

import base64
import binascii
import json
import logging
import time
from collections.abc import Callable
from typing import Any, cast

from kombu.transport import redis as kombu_redis
from kombu.utils.json import dumps, loads

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
    if props.get("body_encoding") == "base64" and raw.get("body"):
        try:
            base64.b64decode(raw["body"])  # as kombu's Base64 codec decodes it: not strict
        except (binascii.Error, ValueError) as exc:
            return f"a body that is not base64 ({exc})"
    if not isinstance(raw.get("headers") or {}, dict):
        return "headers that are not an object"
    for key in ("content-type", "content-encoding"):
        if not isinstance(raw.get(key) or "", str):
            return f"a {key} that is not a string"
    return None


def message_problem(item: bytes | str) -> str | None:
    """Why ``item`` (a message as it lies in a Redis list) is not one kombu can deliver; None when
    it is. Decoded with kombu's own JSON decoder, whose type hook refuses more than JSON does."""
    try:
        raw = loads(item)
    except Exception as exc:  # not UTF-8, not JSON, or a "__type__" object kombu's hook fails on (TypeError...)
        return f"not JSON kombu reads ({type(exc).__name__}: {exc})"
    return envelope_problem(raw)


class Channel(kombu_redis.Channel):
    """kombu's Redis channel, setting aside the messages it cannot deliver (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # kombu makes each Redis client with ``Client``; the one it polls with BRPOP it made while
        # starting (it pings the server), so that one is screened here too.
        make = self.Client

        def screened_client(**options: Any) -> Any:
            return self.screen(make(**options))

        self.Client = cast("type[Any]", screened_client)  # kombu only calls it: Client(**options)
        self.screen(self.client)

    def screen(self, client: Any) -> Any:
        """``client`` (a redis-py client) with BRPOP and RPOP replies screened (see the module)."""
        def taken(queue: str, item: Any, reply: Any) -> Any:
            # ``reply`` when ``item`` is a message kombu can deliver, else None (an empty queue to
            # kombu) once the message is set aside: taken off the queue, it is ours alone to keep.
            problem = message_problem(item)
            if problem is None:
                return reply
            self.set_aside(item.decode("utf-8", "replace") if isinstance(item, bytes) else item, queue, problem)
            return None

        def brpop(reply: Any, **options: Any) -> Any:
            if not reply:
                return None
            key, item = reply
            queue = key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)
            return taken(queue.rsplit(self.sep, 1)[0], item, tuple(reply))

        def rpop(reply: Any, **options: Any) -> Any:
            if reply is None or isinstance(reply, list):  # nothing, or RPOP with a count (kombu asks none)
                return reply
            return taken("a consumed queue", reply, reply)

        client.set_response_callback("BRPOP", brpop)
        client.set_response_callback("RPOP", rpop)
        return client

    def basic_consume(self, queue: str, no_ack: bool, callback: Callable[..., Any] | None, consumer_tag: str | None,
                      **kwargs: Any) -> Any:
        assert callback is not None

        def guarded(message: Any) -> Any:
            try:
                return callback(message)
            except self.connection.connection_errors:
                raise
            except Exception as exc:  # what Celery does not handle itself: it must not end the worker
                self.set_aside(_envelope_of(message), queue, f"{type(exc).__name__}: {exc}")
                if not no_ack and not message.acknowledged:
                    message.ack()  # taken: acknowledged, never redelivered
                return None

        return super().basic_consume(queue, no_ack, guarded, consumer_tag, **kwargs)

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


def _envelope_of(message: Any) -> dict[str, Any]:
    """What a delivered kombu Message carried, from its public attributes, to be kept."""
    body = message.body
    return {"body": body.decode("utf-8", "replace") if isinstance(body, bytes) else body,
            "content-type": message.content_type, "headers": message.headers, "properties": message.properties}


def _json_or_repr(raw: Any) -> str:
    try:
        return json.dumps(raw)
    except (TypeError, ValueError):
        return repr(raw)
