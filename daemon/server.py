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

No caller stops or starves the daemon (an enterprise-mode daemon's callers are every local user):
every request is bounded by the protocol before an op sees it; each local user other than root
and the daemon's own account holds at most ``Limits.connections_per_user`` connections, runs at
most ``Limits.searches_per_user`` searches at once and sends at most
``Limits.requests_per_second`` requests (a token bucket): past these they are answered ``busy``
at once. A free search turn goes to the waiting user with the fewest searches running, so one
user's flood waits behind another's single search rather than in front of it. All connections
together stay below the descriptor limit (``connection_budget``) with room for the index, the
watcher and the converters; when accept() fails for want of descriptors all the same, the
acceptor rests (``ACCEPT_REST``) instead of spinning, with one log line for the episode.
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import selectors
import socket
import struct
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Hashable, Iterator, Mapping

from deskdex import protocol
from deskdex.errors import AlreadyRunning, Busy, DaemonError, DeskdexError, Forbidden, TooLarge, UnknownOp

if TYPE_CHECKING:
    from deskdex.settings import Config

logger = logging.getLogger(__name__)

MAX_LINE = protocol.MAX_LINE
# Searches run at once, the rest waiting in line. They share one view of the index, so two let one
# search while the other's reply is encoded; more only interleave, which stretches the slowest
# answers (50 clients, benchmarks/clients_load.py: p99 330 ms with 2, 570 ms unbounded).
# Other ops are not held up by them.
SEARCHES_AT_ONCE = 2
MAX_CONNECTIONS = 1024  # all callers together, at most (each is a thread and a descriptor)
RESERVED_DESCRIPTORS = 64  # at least, kept from connections for the index, watcher, converters and crawler
ACCEPT_REST = (0.1, 1.0)  # seconds the acceptor rests after accept() failed: the first, then doubled up to
SEND_TIMEOUT = 30  # seconds a reply may wait for a client that does not read it; then the connection ends


@dataclass(frozen=True, slots=True)
class Limits:
    """What one local user of an enterprise-mode daemon may hold of it (core/settings.py has their
    meaning); root and the daemon's own account are not limited."""

    connections_per_user: int = 32
    searches_per_user: int = 2
    requests_per_second: float = 50.0  # 0: no limit; bursts of twice as many

    @classmethod
    def from_settings(cls, cfg: Config) -> Limits:
        """The settings' limits (within their bounds: at least one connection and one search)."""
        s = cfg.settings
        return cls(s.connections_per_user, s.searches_per_user, s.requests_per_second)


def connection_budget() -> int:
    """Connections all callers together may hold: at most MAX_CONNECTIONS, and a quarter of the
    descriptor limit (at least RESERVED_DESCRIPTORS) left to the rest of the daemon."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(1, min(MAX_CONNECTIONS, soft - max(RESERVED_DESCRIPTORS, soft // 4)))


def raise_descriptor_limit() -> int:
    """Raise this process's soft limit of open files to its hard limit (1024 by default, where the
    hard one is often far higher), so that callers' connections do not starve the daemon's own
    files; returns the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:  # macOS refuses RLIM_INFINITY: keep what there is
            logger.info("could not raise the limit of open files from %d: %s", soft, exc)
    return int(soft)


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
    """At most ``n`` holders at once, and at most ``per_key`` holding under one key (a uid; the key
    None is never capped). A free slot goes to the waiter whose key holds fewest slots, the longest
    waiting among them: nobody is overtaken by a newcomer of their own kind (threading.Semaphore
    lets one take a slot a waiter was woken for), and a key with many waiters takes no more than
    its turn from a key with one."""

    def __init__(self, n: int, per_key: int | None = None) -> None:
        self._free = n
        self._per_key = per_key
        self._held: dict[Hashable, int] = {}
        self._lock = threading.Lock()
        self._waiting: list[tuple[Hashable, threading.Lock]] = []  # in the order they came

    @contextmanager
    def turn(self, key: Hashable = None) -> Iterator[None]:
        """Wait for a slot for ``key``, hold it meanwhile."""
        turn = threading.Lock()
        turn.acquire()
        with self._lock:
            self._waiting.append((key, turn))
            self._hand_over()
        turn.acquire()  # released by _hand_over, now or when a holder leaves
        try:
            yield
        finally:
            with self._lock:
                self._held[key] -= 1
                if not self._held[key]:
                    del self._held[key]
                self._free += 1
                self._hand_over()

    def _hand_over(self) -> None:
        """Give the free slots to the waiters first in line (under the lock)."""
        while self._free and self._waiting:
            allowed = [(self._held.get(key, 0), i) for i, (key, _) in enumerate(self._waiting)
                       if key is None or self._per_key is None or self._held.get(key, 0) < self._per_key]
            if not allowed:
                return
            key, turn = self._waiting.pop(min(allowed)[1])
            self._free -= 1
            self._held[key] = self._held.get(key, 0) + 1
            turn.release()


class Server:
    def __init__(self, path: str, handlers: Mapping[str, Handler], public: bool = False,
                 limits: Limits = Limits(), connections: int | None = None) -> None:
        self.path = os.path.abspath(path)
        self.public = public
        self.handlers = dict(handlers)
        self.limits = limits
        self.connections = connections or connection_budget()  # all callers together, at most
        self._sock: socket.socket | None = None
        self._wake_r, self._wake_w = os.pipe()
        self._conns: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._searches = Turns(SEARCHES_AT_ONCE, limits.searches_per_user)
        self._per_user: dict[int, int] = {}  # open connections of each limited uid
        self._buckets: dict[int, list[float]] = {}  # limited uid -> [tokens, when counted (monotonic)]
        self._refused = 0  # connections refused since the last log line about it
        self._refused_logged = 0.0
        self._stopping = False
        self._stopped = threading.Event()
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
        self._stopped.set()
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
        failures, rest = 0, 0.0
        with selectors.DefaultSelector() as sel:
            sel.register(self._sock, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            while not self._stopping:
                ready = sel.select()  # no timeout: sleeps until a client or stop()
                if self._stopping:
                    return
                if all(key.fileobj == self._wake_r for key, _ in ready):
                    continue
                try:
                    conn, _ = self._sock.accept()
                except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                    continue  # the client gave up before we took it: nothing wrong here
                except OSError as exc:
                    # EMFILE, ENFILE, ENOBUFS: the connection stays queued and select() says so again
                    # at once. Rest instead of spinning; say so once for the episode, not per try.
                    if not failures:
                        logger.warning("accept failed: %s; resting before accepting again%s", exc,
                                       " (out of descriptors)" if exc.errno in (errno.EMFILE, errno.ENFILE) else "")
                    failures += 1
                    rest = min(ACCEPT_REST[1], rest * 2 or ACCEPT_REST[0])
                    if self._stopped.wait(rest):
                        return
                    continue
                if failures:
                    logger.warning("accepting again after %d failed tries", failures)
                    failures, rest = 0, 0.0
                self._admit(conn)

    def _limited(self, peer: Peer) -> bool:
        """A caller held to Limits: any local user of an enterprise-mode daemon but root and its own."""
        return self.public and peer.uid not in (0, os.getuid())

    def _admit(self, conn: socket.socket) -> None:
        """Serve ``conn`` on a thread of its own, or refuse it ``busy`` when its user, or all
        callers together, hold their share of connections already."""
        try:
            peer = peer_of(conn)
        except OSError:
            conn.close()
            return
        limited = self._limited(peer) and peer.uid is not None
        with self._lock:
            held = self._per_user.get(peer.uid, 0) if limited and peer.uid is not None else 0
            if len(self._conns) >= self.connections:
                refusal = f"the daemon serves {self.connections} connections already: try again shortly"
            elif limited and held >= self.limits.connections_per_user:
                refusal = (f"uid {peer.uid} holds {held} connections to the daemon already, the most one user may: "
                           "close one first")
            else:
                refusal = ""
                self._conns.add(conn)
                if limited and peer.uid is not None:
                    self._per_user[peer.uid] = held + 1
        if refusal:
            self._refuse(conn, Busy(refusal))
            return
        t = threading.Thread(target=self._serve, args=(conn, peer, limited), name="deskdex-client", daemon=True)
        with self._lock:
            self._threads.add(t)
        t.start()

    def _refuse(self, conn: socket.socket, exc: Busy) -> None:
        """Answer ``exc`` without waiting for the client, and close. Logged at most once a minute."""
        try:
            conn.setblocking(False)
            conn.send(protocol.error_reply(exc, anyone=True))
        except OSError:
            pass
        conn.close()
        self._refused += 1
        if time.monotonic() - self._refused_logged > 60:
            logger.warning("refused %d connections: %s", self._refused, exc)
            self._refused, self._refused_logged = 0, time.monotonic()

    def _serve(self, conn: socket.socket, peer: Peer, limited: bool) -> None:
        try:
            # A client that stops reading its replies frees its thread after SEND_TIMEOUT.
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", SEND_TIMEOUT, 0))
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
                if limited and peer.uid is not None:
                    self._per_user[peer.uid] -= 1
                    if not self._per_user[peer.uid]:
                        del self._per_user[peer.uid]

    def _charge(self, peer: Peer) -> None:
        """One request of a limited caller taken from its token bucket; Busy when it is empty."""
        rate = self.limits.requests_per_second
        if not rate or not self._limited(peer) or peer.uid is None:
            return
        now = time.monotonic()
        with self._lock:
            bucket = self._buckets.setdefault(peer.uid, [2 * rate, now])
            bucket[0] = min(2 * rate, bucket[0] + (now - bucket[1]) * rate)
            bucket[1] = now
            if bucket[0] < 1:
                raise Busy(f"uid {peer.uid} sends more than {rate:g} requests a second: try again in "
                           f"{(1 - bucket[0]) / rate:.2f} s")
            bucket[0] -= 1

    def answer(self, line: bytes, peer: Peer) -> bytes:
        """The reply line to one request line (public so it can be tested without a socket)."""
        anyone = self.public and peer.uid != 0  # any local user, not the daemon's owner
        try:
            self._charge(peer)
            op, args = protocol.parse_request(line)
            return protocol.result_reply(self._run(op, args, peer))
        except DeskdexError as exc:
            return protocol.error_reply(exc, anyone)
        except Exception as exc:
            logger.exception("request %.200r failed", line)
            return protocol.error_reply(DaemonError(f"{type(exc).__name__}: {exc}"), anyone)

    def call(self, op: str, args: Mapping[str, Any], peer: Peer) -> Any:
        """One op asked in this process for ``peer`` (the web UI, for its logged-in account): the
        same checks, limits and refusals as a request on the socket; a DeskdexError when refused
        (protocol.error_object gives what the caller may see of it)."""
        self._charge(peer)
        spec = protocol.OPS.get(op)
        if spec is None:
            raise UnknownOp(f"unknown op {op!r}")
        try:
            return self._run(spec, protocol.check_args(spec, dict(args)), peer)
        except DeskdexError:
            raise
        except Exception as exc:
            logger.exception("%s for uid %s failed", op, peer.uid)
            raise DaemonError(f"{type(exc).__name__}: {exc}") from exc

    def _run(self, op: protocol.Op, args: dict[str, Any], peer: Peer) -> Any:
        if self.public and peer.uid != 0 and (not op.public or peer.uid is None):
            raise Forbidden(f"{op.name}: only root may do this on the system daemon")
        handler = self.handlers.get(op.name)
        if handler is None:
            raise UnknownOp(f"{op.name}: this daemon does not serve it")
        if op.name not in ("search", "document"):  # document reads a whole text: a search's turn too
            return handler(Request(op.name, args, peer))
        with self._searches.turn(peer.uid if self._limited(peer) else None):
            return handler(Request(op.name, args, peer))

    @staticmethod
    def _send(conn: socket.socket, reply: bytes) -> None:
        conn.sendall(reply)
