"""The daemon's local socket, speaking deskdex.protocol: one JSON object a line in, one a line out,
many per connection.

Handlers come from the caller as a table ``{op: handler(request) -> JSON-able result}``; each
request carries its checked arguments and the caller's uid, gid and pid as the kernel reports them
(SO_PEERCRED), never as the client claims them. A handler answers an error by raising any
deskdex.errors exception: its code goes on the wire. Anything else it raises is a bug, answered
``internal`` (the traceback goes to the log).

The socket is 0600 in a 0700 folder; an enterprise-mode daemon's (``public=True``) is 0666 in a
0755 folder, so any local user connects: such a caller may use the protocol's public ops only
(the others answer ``forbidden``), the handlers filter by the caller's uid, and error messages
that could name internal paths reach such a caller as the code's meaning only. One thread
accepts (blocked in select, woken by a pipe on stop), one thread a connection (blocked in a
read): nothing runs while nobody asks.

Many clients at once: the kernel queues connections not yet accepted up to the system's limit
(``SOMAXCONN``, 4096 on current Linux) rather than refusing them, and at most
``SEARCHES_AT_ONCE`` searches run together, the others waiting their turn in the order they came
(``Turns``), so a burst queues and is answered in order instead of failing or starving a few.
"""

from __future__ import annotations

import collections
import logging
import os
import selectors
import socket
import struct
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from deskdex import protocol
from deskdex.errors import AlreadyRunning, DaemonError, DeskdexError, Forbidden, TooLarge, UnknownOp

logger = logging.getLogger(__name__)

MAX_LINE = protocol.MAX_LINE
# Searches run at once, the rest waiting in line. They share one view of the index, so two let one
# search while the other's reply is encoded; more only interleave, which stretches the slowest
# answers (50 clients, benchmarks/clients_load.py: p99 330 ms with 2, 570 ms unbounded).
# Other ops are not held up by them.
SEARCHES_AT_ONCE = 2


@dataclass(frozen=True, slots=True)
class Peer:
    uid: int | None
    gid: int | None
    pid: int | None


@dataclass(frozen=True, slots=True)
class Request:
    op: str
    args: dict[str, Any] = field(default_factory=dict)  # checked against protocol.OPS, defaults filled in
    peer: Peer = Peer(None, None, None)


Handler = Callable[[Request], Any]


def private_dir(path: str) -> str:
    """Create ``path`` (and parents) if needed and make it 0700."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def peer_of(conn: socket.socket) -> Peer:
    """Who is on the other end, from the kernel."""
    if hasattr(socket, "SO_PEERCRED"):  # Linux
        pid, uid, gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                            struct.calcsize("3i")))
        return Peer(uid, gid, pid)
    return Peer(None, None, None)  # macOS/BSD would need getpeereid(); handlers must then refuse


class Turns:
    """At most ``n`` holders at once; the others wait in the order they came (a slot is handed to
    the longest waiting, so nobody is overtaken: threading.Semaphore lets a newcomer take a slot
    a waiter was woken for)."""

    def __init__(self, n: int) -> None:
        self._free = n
        self._lock = threading.Lock()
        self._waiting: collections.deque[threading.Lock] = collections.deque()

    def __enter__(self) -> None:
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return
            turn = threading.Lock()
            turn.acquire()
            self._waiting.append(turn)
        turn.acquire()  # released by the holder that hands over its slot

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().release()
            else:
                self._free += 1


class Server:
    def __init__(self, path: str, handlers: Mapping[str, Handler], public: bool = False) -> None:
        self.path = os.path.abspath(path)
        self.public = public
        self.handlers = dict(handlers)
        self._sock: socket.socket | None = None
        self._wake_r, self._wake_w = os.pipe()
        self._conns: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._searches = Turns(SEARCHES_AT_ONCE)
        self._stopping = False
        self._acceptor = threading.Thread(target=self._accept_loop, name="deskdex-socket", daemon=True)

    def start(self) -> "Server":
        folder = os.path.dirname(self.path)
        if self.public:
            os.makedirs(folder, mode=0o755, exist_ok=True)
            os.chmod(folder, 0o755)
        else:
            private_dir(folder)
        self._remove_stale()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(self.path)
        # Private: nobody else can reach it meanwhile, the folder is 0700.
        os.chmod(self.path, 0o666 if self.public else 0o600)
        sock.listen(socket.SOMAXCONN)  # the kernel caps it at its own limit (net.core.somaxconn)
        self._sock = sock
        self._acceptor.start()
        logger.info("listening on %s", self.path)
        return self

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop accepting, end every connection, wait for the threads, remove the socket."""
        if self._stopping:
            return
        self._stopping = True
        os.write(self._wake_w, b"x")
        if self._acceptor.is_alive():
            self._acceptor.join()
        with self._lock:
            conns, threads = list(self._conns), list(self._threads)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked reading it
            except OSError:
                pass
        for t in threads:
            t.join()
        if self._sock is not None:
            self._sock.close()
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _remove_stale(self) -> None:
        """A socket file left by a daemon that died: remove it. One that answers: refuse."""
        if not os.path.exists(self.path):
            return
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(self.path)
        except OSError:
            os.unlink(self.path)
            logger.info("removed a stale socket %s", self.path)
            return
        finally:
            probe.close()
        raise AlreadyRunning(f"another daemon answers on {self.path}")

    def _accept_loop(self) -> None:
        assert self._sock is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self._sock, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            while not self._stopping:
                ready = sel.select()  # no timeout: sleeps until a client or stop()
                if self._stopping:
                    return
                if any(key.fileobj is self._sock for key, _ in ready):
                    try:
                        conn, _ = self._sock.accept()
                    except OSError as exc:
                        logger.warning("accept failed: %s", exc)
                        continue
                    t = threading.Thread(target=self._serve, args=(conn,), name="deskdex-client", daemon=True)
                    with self._lock:
                        self._conns.add(conn)
                        self._threads.add(t)
                    t.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            peer = peer_of(conn)
            with conn.makefile("rb") as reader:
                while not self._stopping:
                    line = reader.readline(MAX_LINE + 1)
                    if not line:
                        return
                    if len(line) > MAX_LINE and not line.endswith(b"\n"):
                        self._send(conn, protocol.error_reply(TooLarge(f"request longer than {MAX_LINE} bytes")))
                        return  # the rest of the line cannot be told from the next request
                    self._send(conn, self.answer(line, peer))
        except OSError:
            pass  # the client went away
        finally:
            conn.close()
            with self._lock:
                self._conns.discard(conn)
                self._threads.discard(threading.current_thread())

    def answer(self, line: bytes, peer: Peer) -> bytes:
        """The reply line to one request line (public so it can be tested without a socket)."""
        anyone = self.public and peer.uid != 0  # any local user, not the daemon's owner
        try:
            op, args = protocol.parse_request(line)
            if anyone and (not op.public or peer.uid is None):
                raise Forbidden(f"{op.name}: only root may do this on the system daemon")
            handler = self.handlers.get(op.name)
            if handler is None:
                raise UnknownOp(f"{op.name}: this daemon does not serve it")
            if op.name != "search":
                return protocol.result_reply(handler(Request(op.name, args, peer)))
            with self._searches:
                return protocol.result_reply(handler(Request(op.name, args, peer)))
        except DeskdexError as exc:
            return protocol.error_reply(exc, anyone)
        except Exception as exc:
            logger.exception("request %.200r failed", line)
            return protocol.error_reply(DaemonError(f"{type(exc).__name__}: {exc}"), anyone)

    @staticmethod
    def _send(conn: socket.socket, reply: bytes) -> None:
        conn.sendall(reply)
