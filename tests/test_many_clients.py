"""Many clients at once: a burst of connections queues (the daemon's listen backlog is the system's,
a client whose connection is refused for a full queue tries again briefly) and the daemon runs a
bounded number of searches at once, the others waiting their turn. benchmarks/clients_load.py
measures the same with 50 clients for 40 s."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from deskdex import protocol
from deskdex.clients.client import CONNECT_PATIENCE, Client
from deskdex.daemon.server import SEARCHES_AT_ONCE, Request, Server
from deskdex.errors import DaemonUnavailable

from .daemon_fixture import BUSY_TIMEOUT, DaemonProcess

pytestmark = [pytest.mark.slow,  # daemons
              pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs Unix sockets"),
              pytest.mark.timeout(BUSY_TIMEOUT)]

BURST = 64


def test_a_burst_of_clients_at_a_busy_daemon_queues_and_is_answered(tmp_path: Path):
    """The daemon is stopped (SIGSTOP: it accepts nothing, as when it is descheduled on a loaded
    machine) while 64 clients connect and send a search; once it runs again every one is answered.
    With a listen backlog of 16, the 18th connection was refused (EAGAIN)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("the zeppelin over the orchard\n")
    daemon = DaemonProcess(tmp_path / "home", [docs]).start()
    clients: list[Client] = []
    try:
        assert daemon.proc is not None
        os.kill(daemon.proc.pid, signal.SIGSTOP)
        try:
            for _ in range(BURST):
                c = Client(daemon.socket, timeout=120)
                clients.append(c)
                c._sock.sendall(protocol.request_line("search", {"query": "zeppelin", "limit": 5}))
        finally:
            os.kill(daemon.proc.pid, signal.SIGCONT)
        for c in clients:
            line = c._readline()
            assert [h["path"] for h in protocol.parse_reply(line)["hits"]] == [str(docs / "a.txt")]
    finally:
        for c in clients:
            c.close()
        daemon.stop()


def _full_listener(path: str) -> tuple[socket.socket, list[socket.socket]]:
    """A listening socket that accepts nothing, its backlog filled by connections: the next
    connect is refused with EAGAIN, as at a daemon swamped by a burst."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(0)
    fillers = []
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(path)
        except BlockingIOError:
            s.close()
            return listener, fillers
        fillers.append(s)


def test_a_connection_refused_for_a_full_queue_is_tried_again(tmp_path: Path):
    os.makedirs(tmp_path / "run", mode=0o700)
    path = str(tmp_path / "run" / "deskdex.sock")
    listener, fillers = _full_listener(path)
    got: list[Any] = []

    def client() -> None:
        try:
            with Client(path) as c:
                got.append(c.call("status"))
        except Exception as exc:  # reported to the test below
            got.append(exc)

    t = threading.Thread(target=client)
    try:
        t.start()
        # The client must still be trying a good while later: it used to fail at once.
        t.join(min(0.5, CONNECT_PATIENCE / 2))
        assert t.is_alive(), f"the client gave up at once: {got}"
        listener.settimeout(10)
        for _ in range(len(fillers) + 1):  # room in the queue: the client's connection comes in last
            conn, _ = listener.accept()
            fillers.append(conn)
        conn.settimeout(10)
        assert protocol.parse_request(conn.recv(65536))[0].name == "status"
        conn.sendall(protocol.result_reply({"state": "idle"}))
        t.join(10)
        assert got == [{"state": "idle"}]
    finally:
        t.join()
        for s in fillers:
            s.close()
        listener.close()


def test_a_queue_that_stays_full_is_a_clean_daemon_unavailable(tmp_path: Path):
    os.makedirs(tmp_path / "run", mode=0o700)
    path = str(tmp_path / "run" / "deskdex.sock")
    listener, fillers = _full_listener(path)
    try:
        t0 = time.monotonic()
        with pytest.raises(DaemonUnavailable, match="busy"):
            Client(path)
        assert time.monotonic() - t0 >= CONNECT_PATIENCE * 0.9
    finally:
        for s in fillers:
            s.close()
        listener.close()


def test_searches_beyond_the_bound_wait_their_turn(tmp_path: Path):
    """64 searches at once: never more than SEARCHES_AT_ONCE run together, and every one is
    answered. Each handler waits a little for others to join it: without a bound, all 64 would."""
    lock = threading.Condition()
    inside = [0]
    most = [0]

    def search(req: Request) -> dict[str, Any]:
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            lock.notify_all()
            lock.wait_for(lambda: inside[0] > SEARCHES_AT_ONCE, timeout=0.05)
            inside[0] -= 1
        return {"total": 0, "hits": [], "n": req.args["query"]}

    def status(req: Request) -> dict[str, Any]:
        return {"state": "idle"}

    srv = Server(str(tmp_path / "run" / "s.sock"), {"search": search, "status": status}).start()
    answers: list[Any] = []

    def client(n: int) -> None:
        try:
            with Client(srv.path) as c:
                answers.append(c.call("search", query=str(n))["n"])
        except DaemonUnavailable as exc:
            answers.append(str(exc))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(BURST)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(answers) == sorted(str(n) for n in range(BURST))
        assert most[0] <= SEARCHES_AT_ONCE
    finally:
        srv.stop()
