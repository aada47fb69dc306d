"""``deskdex serve``: this home's index answers merged searches of other machines (index/shards.py
asks, index/remote.py over HTTP) on the address of the setting ``listen``, to whoever sends the
setting ``token``. Nothing listens unless ``listen`` is set; it refuses to start without a token
of at least 16 characters.

Read-only: it opens the index as a reader (readers never lock), beside this home's daemon or
`deskdex index`, and answers the three questions of a merged search (word statistics,
explained candidates, snippets); nothing else of the home is reachable. It answers with
everything the index holds, whoever asks with the token, so it refuses an enterprise-mode (--system)
index, whose searches are filtered by the asking account (``enterprise_index``): at its start, and
a question whose answer would hold one of its documents if such a daemon began on the home since.

A refused question (token, question, size, body) is one log line saying who, what and why; a
connection that ends badly (the client left, a TLS handshake that failed) one line too; only a
failure of the server's own prints a traceback. With the settings tls_cert (and tls_key)
it serves HTTPS, and the token is sent encrypted; without, it crosses the network as written."""

from __future__ import annotations

import hmac
import json
import logging
import os
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from deskdex.errors import ConfigError, DeskdexError, Forbidden, QueryError
from deskdex.index import Collection
from deskdex.index.answers import stats_from_json, stats_to_json
from deskdex.index.search import add_snippets
from deskdex.index.shards import shard_search, shard_stats
from deskdex.paths import SYSTEM_DATA
from deskdex.protocol import MAX_LIMIT, MAX_QUERY, SORTS
from deskdex.settings import MIN_TOKEN, parse_listen

logger = logging.getLogger(__name__)

MAX_BODY = 4 << 20  # bytes of a request: a query's word statistics and a page of URIs are far less
# Seconds a connection may wait for its next request (or its TLS handshake) before it is closed: the
# searching side keeps its connections between searches, and a thread waits on each.
IDLE_SECONDS = 30.0


def enterprise_index(coll: Collection, data_dir: str) -> str | None:
    """Why the index of a home is an enterprise-mode daemon's (None: it is not): the system home, or
    documents stamped with the accounts that may read them, which only such a daemon stamps."""
    if os.path.realpath(data_dir) == os.path.realpath(SYSTEM_DATA):
        return f"{data_dir} is the home of the enterprise-mode daemon (deskdex daemon --system)"
    if coll.catalog.has_readers():
        return f"the index in {data_dir} was made by an enterprise-mode daemon (deskdex daemon --system)"
    return None


def _refusal(why: str) -> str:
    return (f"{why}: it answers each account with what that account may read, and a served shard would "
            "answer whoever holds the token with every account's documents and snippets; it is not served")


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line for a connection that ended badly (socketserver prints a traceback for each)."""
        exc = sys.exc_info()[1]
        who = "%s:%s" % tuple(client_address[:2])
        if isinstance(exc, OSError):  # reset, broken pipe, timeout, a failed TLS handshake (SSLError)
            logger.info("%s: connection ended: %s", who, exc)
        else:
            logger.exception("%s: the shard server failed on a question", who)


class ShardServer:
    """The server, on its own thread until ``close()``."""

    def __init__(self, data_dir: str, listen: str, token: str, cert: str = "", key: str = "") -> None:
        if len(token) < MIN_TOKEN:
            raise ConfigError(f"setting listen needs the setting token, of at least {MIN_TOKEN} characters "
                              "(python3 -c 'import secrets; print(secrets.token_urlsafe())' makes one)")
        tls = _tls(cert, key) if cert else None
        self.data_dir = data_dir
        self.coll = Collection.open(data_dir)
        why = enterprise_index(self.coll, data_dir)
        if why is not None:
            self.coll.close()
            raise ConfigError(_refusal(why))
        self.lock = threading.Lock()  # one question at a time: the catalog's connection is this one
        self.token = f"Bearer {token}".encode()
        try:
            self.http = _HTTPServer(parse_listen(listen), _handler(self))
        except BaseException:
            self.coll.close()
            raise
        if tls is not None:
            # The handshake in the thread of each request, not in the one that accepts them all.
            self.http.socket = tls.wrap_socket(self.http.socket, server_side=True, do_handshake_on_connect=False)
        self.scheme = "https" if tls is not None else "http"
        self.thread = threading.Thread(target=self.http.serve_forever, name="deskdex-shard-server", daemon=True)

    @property
    def address(self) -> str:
        host, port = self.http.server_address[:2]
        return f"{host!s}:{port}"

    def start(self) -> ShardServer:
        self.thread.start()
        return self

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()
        self.thread.join(10)
        self.coll.close()

    def answer(self, what: str, msg: dict[str, Any]) -> dict[str, Any]:
        """The answer to one question; ValueError, KeyError, TypeError for a malformed one."""
        with self.lock:
            if what == "stats":
                terms = [(str(f), str(t)) for f, t in msg["terms"]]
                return stats_to_json(shard_stats(self.coll, terms))
            if what == "search":
                query = _query(msg)
                need, sort = int(msg["need"]), str(msg["sort"])
                if not 0 < need <= MAX_LIMIT or sort not in SORTS:
                    raise ValueError("need or sort out of range")
                part = shard_search(self.coll, query, need, sort, bool(msg["collapse"]), None,
                                    stats_from_json(msg["stats"]))
                self._refuse_enterprise([h["uri"] for h in part.hits])
                return {"total": part.total, "hits": part.hits, "trees": part.trees,
                        "keys": [None if k is None else k.to_json() for k in part.keys], "num_docs": part.num_docs}
            if what == "snippets":
                query = _query(msg)
                hits: list[Any] = [{"uri": str(u)} for u in msg["uris"]][:MAX_LIMIT]
                self.coll.index.reload()
                self._refuse_enterprise([h["uri"] for h in hits])
                found = self._with_lang(hits)
                add_snippets(self.coll, query, found)
                return {"snippets": {h["uri"]: [h.get("snippet"), h.get("highlights")] for h in found}}
        raise KeyError(what)

    def _refuse_enterprise(self, uris: list[str]) -> None:
        """Forbidden when one of ``uris`` is an enterprise-mode daemon's document: one began indexing
        this home after the server started (checked then)."""
        if self.coll.catalog.has_readers(uris):
            raise Forbidden(_refusal(f"the index in {self.data_dir} holds an enterprise-mode daemon's documents"))

    def _with_lang(self, hits: list[dict[str, Any]]) -> list[Any]:
        """The hits still in the index, each with its language (snippets are made in it)."""
        out = []
        for h in hits:
            row = self.coll.catalog.get(h["uri"])
            if row is not None:
                h["lang"] = row.lang
                out.append(h)
        return out


def _tls(cert: str, key: str) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        ctx.load_cert_chain(cert, key or None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"settings tls_cert and tls_key: cannot serve HTTPS with {cert}: {exc}") from exc
    return ctx


def _query(msg: dict[str, Any]) -> str:
    query = msg["query"]
    if not isinstance(query, str) or len(query) > MAX_QUERY:
        raise ValueError("not a query")
    return query


def _handler(server: ShardServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "deskdex-shard"
        protocol_version = "HTTP/1.1"  # connections kept between questions (index/remote.py)
        timeout = IDLE_SECONDS
        # An answer is two writes (headers, body): on a kept connection, Nagle's algorithm holds the
        # second until the client's delayed ACK, 40 ms later.
        disable_nagle_algorithm = True
        _client = "?"  # host:port of the connection, for the log

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self._client = "%s:%s" % tuple(self.client_address[:2])
            given = self.headers.get("Authorization", "").encode()
            # A refusal before the body is read ends the connection: the body would be read as the next request.
            if not hmac.compare_digest(given, server.token):
                return self._send(401, {"message": "a wrong or missing token"}, close=True)
            what = self.path.strip("/")
            if what not in ("stats", "search", "snippets"):
                return self._send(404, {"message": f"no such question: {self.path}"}, close=True)
            if "Transfer-Encoding" in self.headers:  # a body this server does not read: it would be the next request
                return self._send(411, {"message": "a request with Content-Length"}, close=True)
            try:
                length = int(self.headers.get("Content-Length", "0"))
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY:
                return self._send(413, {"message": f"a request of 0 to {MAX_BODY} bytes"}, close=True)
            try:
                msg = json.loads(self.rfile.read(length))
                if not isinstance(msg, dict):
                    raise ValueError("not an object")
                return self._send(200, server.answer(what, msg))
            except QueryError as exc:
                return self._send(400, {"code": exc.code, "message": str(exc), "position": exc.position or 0})
            except (ValueError, KeyError, TypeError) as exc:
                return self._send(400, {"message": f"a question that is not deskdex's: {exc}"})
            except Forbidden as exc:
                return self._send(403, {"code": exc.code, "message": str(exc)})
            except DeskdexError as exc:
                logger.warning("%s: a shard question failed: %s", self._client, exc)
                return self._send(500, {"code": exc.code, "message": str(exc)})

        def _send(self, status: int, body: dict[str, Any], close: bool = False) -> None:
            if 400 <= status < 500:  # a refusal: who, what, why, on one line
                logger.warning("%s: refused %s %s (%d): %s", self._client, self.command, self.path[:200], status,
                               body.get("message", ""))
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
            logger.debug("%s:%s %s", *self.client_address[:2], format % args)  # a connection is its port

        def log_error(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
            # http.server's own refusals (a malformed request line, a method other than POST) and a
            # kept connection that stayed idle: one line each.
            logger.info("%s:%s: %s", *self.client_address[:2], (format % args)[:300])

    return Handler


def serve(data_dir: str, listen: str, token: str, cert: str = "", key: str = "") -> int:
    """``deskdex serve``: answer until Ctrl-C or SIGTERM."""
    import signal

    server = ShardServer(data_dir, listen, token, cert, key)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server.start()
    print(f"deskdex: serving this index's searches on {server.scheme}://{server.address}", flush=True)
    try:
        stop.wait()
    finally:
        server.close()
    return 0
