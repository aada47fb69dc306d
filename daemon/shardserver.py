"""``deskdex serve``: this home's index answers merged searches of other machines (index/shards.py
asks, index/remote.py over HTTP) on the address of the setting ``listen``, to whoever sends the
setting ``token``. Nothing listens unless ``listen`` is set; it refuses to start without a token
of at least 16 characters.

Read-only: it opens the index as a reader (readers never lock), beside this home's daemon or
`deskdex index`, and answers the three questions of a merged search (word statistics,
explained candidates, snippets); nothing else of the home is reachable. It answers with
everything the index holds, whoever asks with the token: do not serve an enterprise-mode (--system)
index, whose searches are filtered by the asking account. With the settings tls_cert (and tls_key)
it serves HTTPS, and the token is sent encrypted; without, it crosses the network as written."""

from __future__ import annotations

import hmac
import json
import logging
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from deskdex.errors import ConfigError, DeskdexError, QueryError
from deskdex.index import Collection
from deskdex.index.answers import stats_from_json, stats_to_json
from deskdex.index.search import add_snippets
from deskdex.index.shards import shard_search, shard_stats
from deskdex.protocol import MAX_LIMIT, MAX_QUERY, SORTS

logger = logging.getLogger(__name__)

MIN_TOKEN = 16
MAX_BODY = 4 << 20  # bytes of a request: a query's word statistics and a page of URIs are far less
# Seconds a connection may wait for its next request (or its TLS handshake) before it is closed: the
# searching side keeps its connections between searches, and a thread waits on each.
IDLE_SECONDS = 30.0


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as (host, port); ConfigError for anything else."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536 or not host:
        raise ConfigError(f"setting listen: HOST:PORT, not {text!r}")
    return host.strip("[]"), int(port)


class ShardServer:
    """The server, on its own thread until ``close()``."""

    def __init__(self, data_dir: str, listen: str, token: str, cert: str = "", key: str = "") -> None:
        if len(token) < MIN_TOKEN:
            raise ConfigError(f"setting listen needs the setting token, of at least {MIN_TOKEN} characters "
                              "(python3 -c 'import secrets; print(secrets.token_urlsafe())' makes one)")
        tls = _tls(cert, key) if cert else None
        self.coll = Collection.open(data_dir)
        self.lock = threading.Lock()  # one question at a time: the catalog's connection is this one
        self.token = f"Bearer {token}".encode()
        self.http = ThreadingHTTPServer(parse_listen(listen), _handler(self))
        self.http.daemon_threads = True
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
                return {"total": part.total, "hits": part.hits, "trees": part.trees,
                        "keys": [None if k is None else k.to_json() for k in part.keys], "num_docs": part.num_docs}
            if what == "snippets":
                query = _query(msg)
                hits: list[Any] = [{"uri": str(u)} for u in msg["uris"]][:MAX_LIMIT]
                self.coll.index.reload()
                found = self._with_lang(hits)
                add_snippets(self.coll, query, found)
                return {"snippets": {h["uri"]: [h.get("snippet"), h.get("highlights")] for h in found}}
        raise KeyError(what)

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

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
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
            except DeskdexError as exc:
                logger.warning("a shard question failed: %s", exc)
                return self._send(500, {"code": exc.code, "message": str(exc)})

        def _send(self, status: int, body: dict[str, Any], close: bool = False) -> None:
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
