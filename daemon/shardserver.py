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
import logging
import os
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from deskdex import wire
from deskdex.errors import BadMessage, ConfigError, DaemonError, DeskdexError, Forbidden, QueryError, TooLarge
from deskdex.index import Collection, add_snippets, shard_search, shard_stats, stats_message, stats_of
from deskdex.paths import SYSTEM_DATA
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
    if coll.stats.has_readers():
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

    def answer(self, question: wire.Question) -> wire.Answer | wire.WordStats:
        """The answer to one question (deskdex.wire's schemas: already checked)."""
        with self.lock:
            if isinstance(question, wire.StatsQuestion):
                return stats_message(shard_stats(self.coll, question.terms))
            if isinstance(question, wire.SearchQuestion):
                part = shard_search(self.coll, question.query, question.need, question.sort, question.collapse, None,
                                    stats_of(question.stats))
                self._refuse_enterprise([h["uri"] for h in part.hits])
                # The structs are written as they are: msgspec checks types when it reads, not here.
                keys: list[Any] = [None if k is None else k.to_json() for k in part.keys]
                hits: list[Any] = part.hits  # SearchHits: a Hit's page may be left out, theirs is None
                return wire.SearchAnswer(part.total, hits, part.trees, keys, part.num_docs)
            if isinstance(question, wire.SnippetsQuestion):
                asked: list[Any] = [{"uri": u} for u in question.uris]
                self.coll.index.reload()
                self._refuse_enterprise([h["uri"] for h in asked])
                found = self._with_lang(asked)
                add_snippets(self.coll, question.query, found)
                return wire.SnippetsAnswer({h["uri"]: (h.get("snippet"), h.get("highlights")) for h in found},
                                           {h["uri"]: h.get("page") for h in found})
        raise TypeError(f"not a question: {type(question).__name__}")

    def _refuse_enterprise(self, uris: list[str]) -> None:
        """Forbidden when one of ``uris`` is an enterprise-mode daemon's document: one began indexing
        this home after the server started (checked then)."""
        if self.coll.stats.has_readers(uris):
            raise Forbidden(_refusal(f"the index in {self.data_dir} holds an enterprise-mode daemon's documents"))

    def _with_lang(self, hits: list[dict[str, Any]]) -> list[Any]:
        """The hits still in the index, each with its language (snippets are made in it)."""
        out = []
        for h in hits:
            row = self.coll.get(h["uri"])
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
                return self._send(401, wire.ErrorAnswer(Forbidden.code, "a wrong or missing token"), close=True)
            what = self.path.strip("/")
            if what not in wire.QUESTIONS:
                return self._send(404, wire.ErrorAnswer(BadMessage.code, f"no such question: {self.path}"), close=True)
            if "Transfer-Encoding" in self.headers:  # a body this server does not read: it would be the next request
                return self._send(411, wire.ErrorAnswer(BadMessage.code, "a request with Content-Length"), close=True)
            try:
                length = int(self.headers.get("Content-Length", "0"))
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY:
                return self._send(413, wire.ErrorAnswer(TooLarge.code, f"a request of 0 to {MAX_BODY} bytes"), close=True)
            try:
                question = wire.decode(self.rfile.read(length), wire.QUESTIONS[what],
                                       f"a question that is not deskdex's (/{what})")
                return self._send(200, server.answer(question))
            except QueryError as exc:
                return self._send(400, wire.ErrorAnswer(exc.code, str(exc), exc.position or 0))
            except BadMessage as exc:
                return self._send(400, wire.ErrorAnswer(exc.code, str(exc)))
            except Forbidden as exc:
                return self._send(403, wire.ErrorAnswer(exc.code, str(exc)))
            except DeskdexError as exc:
                logger.warning("%s: a shard question failed: %s", self._client, exc)
                return self._send(500, wire.ErrorAnswer(exc.code, str(exc)))
            except Exception as exc:  # the server's own failure: its traceback, and an answer all the same
                logger.exception("%s: the shard server failed on a question", self._client)
                return self._send(500, wire.ErrorAnswer(DaemonError.code, f"{type(exc).__name__}: {exc}"))

        def _send(self, status: int, body: wire.Answer | wire.WordStats, close: bool = False) -> None:
            if isinstance(body, wire.ErrorAnswer):  # a refusal: who, what, why, on one line
                logger.warning("%s: refused %s %s (%d): %s", self._client, self.command, self.path[:200], status,
                               body.message)
            data = wire.encode(body)
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
