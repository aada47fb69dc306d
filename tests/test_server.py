"""The socket server and client with real Unix sockets, real processes and real permissions."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading

import pytest

from daemon.client import Client, DaemonError, NotRunning, call
from daemon.instance import AlreadyRunning, InstanceLock
from daemon.server import MAX_LINE, Request, RequestError, Server

pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs Unix sockets")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def handlers() -> dict:
    def status(req: Request) -> dict:
        return {"state": "idle", "queue": 0}

    def whoami(req: Request) -> dict:
        return {"uid": req.peer.uid, "gid": req.peer.gid, "pid": req.peer.pid}

    def echo(req: Request) -> dict:
        return {"text": req.arg("text", str), "times": req.arg("times", int, 1)}

    def boom(req: Request) -> None:
        raise ValueError("handler bug")

    def denied(req: Request) -> None:
        raise RequestError("denied", "not for you")

    return {"status": status, "whoami": whoami, "echo": echo, "boom": boom, "denied": denied}


@pytest.fixture
def server(tmp_path):
    srv = Server(str(tmp_path / "run" / "deskdex.sock"), handlers()).start()
    yield srv
    srv.stop()


def test_round_trip_and_many_calls_on_one_connection(server):
    assert call(server.path, "status") == {"state": "idle", "queue": 0}
    with Client(server.path) as c:
        assert [c.call("echo", text="hé", times=i)["times"] for i in range(5)] == list(range(5))


def test_peer_credentials_come_from_the_kernel(server):
    got = call(server.path, "whoami", uid=12345, pid=1)  # what the client claims is ignored
    assert got == {"uid": os.getuid(), "gid": os.getgid(), "pid": os.getpid()}
    code = ("import json, sys; from daemon.client import call; "
            "print(json.dumps(call(sys.argv[1], 'whoami')))")
    proc = subprocess.Popen([sys.executable, "-c", code, server.path], stdout=subprocess.PIPE, cwd=REPO, text=True)
    out, _ = proc.communicate(timeout=20)
    assert json.loads(out)["pid"] == proc.pid


@pytest.mark.parametrize("line, code", [
    (b"not json\n", "bad_request"),
    (b'["status"]\n', "bad_request"),
    (b'{"op": 3}\n', "bad_request"),
    (b'{"op": "nope"}\n', "unknown_op"),
    (b'{"op": "echo"}\n', "bad_args"),
    (b'{"op": "echo", "text": 5}\n', "bad_args"),
    (b'{"op": "boom"}\n', "internal"),
    (b'{"op": "denied"}\n', "denied"),
])
def test_errors_carry_a_code(server, line, code):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(server.path)
        s.sendall(line)
        reply = json.loads(s.makefile("rb").readline())
    assert reply["ok"] is False and reply["error"]["code"] == code, reply
    with pytest.raises(DaemonError) as exc:  # and the connection-level error reaches the client
        call(server.path, "nope")
    assert exc.value.code == "unknown_op" and "status" in exc.value.message


def test_a_line_too_long_is_refused(server):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(server.path)
        s.sendall(b'{"op": "echo", "text": "' + b"x" * MAX_LINE + b'"}\n')
        reply = json.loads(s.makefile("rb").readline())
    assert reply["error"]["code"] == "too_large"


def test_private_socket_and_folder(server):
    assert stat.S_IMODE(os.stat(server.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(server.path)).st_mode) == 0o700


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_other_users_cannot_connect(server):
    code = "import sys; from daemon.client import call; call(sys.argv[1], 'status')"
    proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable,
                           "-c", code, server.path], cwd=REPO, capture_output=True, text=True, timeout=20)
    assert proc.returncode != 0 and "PermissionError" in proc.stderr


def test_not_running_is_clear(tmp_path):
    with pytest.raises(NotRunning):
        call(str(tmp_path / "absent.sock"), "status")
    stale = tmp_path / "stale.sock"  # a socket file nobody listens on: what a killed daemon leaves
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(stale))
    s.close()
    with pytest.raises(NotRunning):
        call(str(stale), "status")


def test_stale_socket_is_replaced_and_a_live_one_is_not(tmp_path):
    path = str(tmp_path / "run" / "deskdex.sock")
    os.makedirs(os.path.dirname(path))
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
    srv = Server(str(tmp_path / "s.sock"), handlers()).start()
    clients = [Client(srv.path) for _ in range(3)]
    assert clients[0].call("status")
    srv.stop()
    assert set(threading.enumerate()) <= before
    with pytest.raises(NotRunning):
        clients[1].call("status")
    for c in clients:
        c.close()


def test_client_imports_nothing_heavy():
    code = "import sys; import daemon.client; print(sorted(m for m in sys.modules if m.startswith(('daemon', 'converters', 'index', 'watchdog'))))"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert json.loads(out.replace("'", '"')) == ["daemon", "daemon.client"]


def test_second_instance_is_refused_with_the_holders_pid(tmp_path):
    lock = str(tmp_path / "daemon.lock")
    code = ("import sys; from daemon.instance import InstanceLock; l = InstanceLock(sys.argv[1]).acquire(); "
            "print('held', flush=True); sys.stdin.read()")
    holder = subprocess.Popen([sys.executable, "-c", code, lock], cwd=REPO, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(AlreadyRunning, match=f"pid {holder.pid}"):
            InstanceLock(lock).acquire()
        assert stat.S_IMODE(os.stat(lock).st_mode) == 0o600
    finally:
        holder.kill()
        holder.wait()
    with InstanceLock(lock):  # the kernel dropped the dead holder's lock
        pass
