"""The socket server and client with real Unix sockets, real processes and real permissions, speaking
the protocol of deskdex.protocol (the ops' handlers here are stand-ins: the daemon's own are tested
through a real daemon in test_daemon.py)."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading

import pytest

from deskdex import protocol
from deskdex.clients.client import Client, call
from deskdex.daemon.instance import InstanceLock
from deskdex.daemon.server import MAX_LINE, Request, Server
from deskdex.errors import (AlreadyRunning, BadArgs, DaemonError, DaemonUnavailable, QueryError, StoreError,
                            UnknownOp)

pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs Unix sockets")


def handlers() -> dict:
    def status(req: Request) -> dict:
        return {"state": "idle", "queue": 0, "peer": [req.peer.uid, req.peer.gid, req.peer.pid]}

    def search(req: Request) -> dict:
        if req.args["query"] == "boom":
            raise ValueError("handler bug in /var/lib/deskdex/secret")
        if req.args["query"] == "(":
            raise QueryError("parenthesis never closed", position=0)
        if req.args["query"] == "store":
            raise StoreError("catalog error in /var/lib/deskdex/catalog.sqlite")
        return {"total": 0, "hits": [], "args": req.args}

    return {"status": status, "search": search}


@pytest.fixture
def server(tmp_path):
    srv = Server(str(tmp_path / "run" / "deskdex.sock"), handlers()).start()
    yield srv
    srv.stop()


def test_round_trip_and_many_calls_on_one_connection(server):
    assert call(server.path, "status")["state"] == "idle"
    with Client(server.path) as c:
        got = [c.call("search", query="hé", limit=i)["args"] for i in range(1, 6)]
    assert [g["limit"] for g in got] == [1, 2, 3, 4, 5]
    # defaults from the protocol fill in what was not sent
    assert got[0] == {"query": "hé", "limit": 1, "offset": 0, "sort": "relevance", "all": False, "snippets": True,
                      "similar": None, "facets": False, "words": False}


def test_peer_credentials_come_from_the_kernel(server):
    with pytest.raises(BadArgs, match="unknown argument"):  # a claim about oneself is not even taken
        call(server.path, "status", uid=12345, pid=1)
    assert call(server.path, "status")["peer"] == [os.getuid(), os.getgid(), os.getpid()]
    code = "import json, sys; from deskdex.clients.client import call; print(json.dumps(call(sys.argv[1], 'status')))"
    proc = subprocess.Popen([sys.executable, "-c", code, server.path], stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=20)
    assert json.loads(out)["peer"][2] == proc.pid


@pytest.mark.parametrize("line, code", [
    (b"not json\n", "bad_request"),
    (b'["status"]\n', "bad_request"),
    (b'{"op": 3}\n', "bad_request"),
    (b'{"op": "nope"}\n', "unknown_op"),
    (b'{"op": "watch_add", "path": "/x"}\n', "unknown_op"),  # in the protocol, not served here
    (b'{"op": "search"}\n', "bad_args"),
    (b'{"op": "search", "query": 5}\n', "bad_args"),
    (b'{"op": "search", "query": "x", "limit": 1000000000}\n', "bad_args"),
    (b'{"op": "search", "query": "x", "limit": true}\n', "bad_args"),
    (b'{"op": "search", "query": "x", "sort": "weight"}\n', "bad_args"),
    (b'{"op": "search", "query": "x", "limit": NaN}\n', "bad_request"),
    (b'{"op": "search", "query": "boom"}\n', "internal"),
    (b'{"op": "search", "query": "("}\n', "bad_query"),
])
def test_errors_carry_a_code(server, line, code):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(server.path)
        s.sendall(line)
        reply = json.loads(s.makefile("rb").readline())
    assert reply["ok"] is False and reply["error"]["code"] == code, reply
    assert reply["error"]["code"] in protocol.ERRORS


def test_each_code_comes_back_as_its_exception_with_its_fields(server):
    with pytest.raises(UnknownOp, match="status"):  # the message lists the ops there are
        call(server.path, "nope")
    with pytest.raises(QueryError) as exc:
        call(server.path, "search", query="(")
    assert exc.value.position == 0  # a field on the wire, not parsed out of the message
    with pytest.raises(DaemonError) as internal:
        call(server.path, "search", query="boom")
    assert internal.value.code == "internal"
    unknown = protocol.error_from_reply({"code": "from_a_newer_daemon", "message": "hm"})
    assert isinstance(unknown, DaemonError) and unknown.code == "from_a_newer_daemon"


def test_another_user_of_a_public_daemon_gets_no_class_names_or_paths(tmp_path):
    """What the server answers a non-root caller of an enterprise-mode daemon (the caller's uid is
    the kernel's: here the Peer is made up, since only root can be another user for real, which
    test_other_users_are_refused_by_the_kernel and test_privacy.py do)."""
    from deskdex.daemon.server import Peer

    srv = Server(str(tmp_path / "s.sock"), handlers(), public=True)
    try:
        other, root = Peer(1000, 1000, 1), Peer(0, 0, 1)
        for query in ("boom", "store"):
            line = protocol.request_line("search", {"query": query})
            shown = json.loads(srv.answer(line, other))["error"]["message"]
            assert "ValueError" not in shown and "/var/lib" not in shown, shown
            assert "/var/lib" in json.loads(srv.answer(line, root))["error"]["message"]
        bad = json.loads(srv.answer(protocol.request_line("search", {"query": "("}), other))["error"]
        assert bad["code"] == "bad_query" and "never closed" in bad["message"] and bad["position"] == 0
        refused = json.loads(srv.answer(protocol.request_line("pause", {}), other))["error"]
        assert refused["code"] == "forbidden"
    finally:
        os.close(srv._wake_r)
        os.close(srv._wake_w)


def test_a_line_too_long_is_refused(server):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(server.path)
        s.sendall(b'{"op": "search", "query": "' + b"x" * MAX_LINE + b'"}\n')
        reply = json.loads(s.makefile("rb").readline())
    assert reply["error"]["code"] == "too_large"


def test_private_socket_and_folder(server):
    assert stat.S_IMODE(os.stat(server.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(server.path)).st_mode) == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can become another account")
def test_other_users_are_refused_by_the_kernel(server):
    """A forked child becomes uid 65534 and tries to connect: nothing it runs is read from disk, so
    it does not matter where the checkout lives."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = b"connected"
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            s = socket.socket(socket.AF_UNIX)
            s.connect(server.path)
        except PermissionError:
            code = b"refused"
        except BaseException as exc:  # noqa: BLE001 - report anything else to the parent
            code = repr(exc).encode()
        os.write(w, code)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        got = f.read()
    os.waitpid(pid, 0)
    assert got == b"refused"


def test_not_running_is_clear(tmp_path):
    with pytest.raises(DaemonUnavailable):
        call(str(tmp_path / "absent.sock"), "status")
    stale = tmp_path / "stale.sock"  # a socket file nobody listens on: what a killed daemon leaves
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(stale))
    s.close()
    with pytest.raises(DaemonUnavailable):
        call(str(stale), "status")


def test_stale_socket_is_replaced_and_a_live_one_is_not(tmp_path):
    path = str(tmp_path / "run" / "deskdex.sock")
    os.makedirs(os.path.dirname(path), mode=0o700)
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.close()
    with Server(path, handlers()) as srv:
        assert call(path, "status")["state"] == "idle"
        with pytest.raises(AlreadyRunning):
            Server(path, handlers()).start()
        assert call(srv.path, "status")["state"] == "idle"
    assert not os.path.exists(path)


def test_stop_ends_idle_connections_and_threads(tmp_path):
    before = set(threading.enumerate())
    srv = Server(str(tmp_path / "run" / "s.sock"), handlers()).start()
    clients = [Client(srv.path) for _ in range(3)]
    assert clients[0].call("status")
    srv.stop()
    assert set(threading.enumerate()) <= before
    with pytest.raises(DaemonUnavailable):
        clients[1].call("status")
    for c in clients:
        c.close()


def test_client_imports_nothing_heavy():
    code = ("import sys; import deskdex.clients.client; print(sorted(m for m in sys.modules if m.startswith("
            "('deskdex', 'watchdog', 'tantivy', 'json', 'typing', 'socket', 'dataclasses'))))")
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True).stdout
    # deskdex.lazy: the Python API's names, taken from their module on first use (core/__init__.py)
    assert json.loads(out.replace("'", '"')) == ["deskdex", "deskdex.clients", "deskdex.clients.client",
                                                 "deskdex.errors", "deskdex.lazy", "deskdex.protocol"]


def test_second_instance_is_refused_with_the_holders_pid(tmp_path):
    lock = str(tmp_path / "daemon.lock")
    code = ("import sys; from deskdex.daemon.instance import InstanceLock; l = InstanceLock(sys.argv[1]).acquire(); "
            "print('held', flush=True); sys.stdin.read()")
    holder = subprocess.Popen([sys.executable, "-c", code, lock], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(AlreadyRunning, match=f"pid {holder.pid}"):
            InstanceLock(lock).acquire()
        assert stat.S_IMODE(os.stat(lock).st_mode) == 0o600
    finally:
        holder.kill()
        holder.communicate()  # waits, and closes its pipes
    with InstanceLock(lock):  # the kernel dropped the dead holder's lock
        pass

