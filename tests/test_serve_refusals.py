"""`deskdex serve` (daemon/shardserver.py) refuses what it must, and says so in one line (issue 28):
an enterprise-mode home is never served (its index answers each account with what it may read; a
served shard would answer the token's holder with everyone's documents), and a refused question
or a connection that ends badly is one log line naming who, what and why, never a traceback.

Real processes: the installed .venv/bin/deskdex, a real system daemon (`daemon --system --once`)
over a real account's home (tests/accounts.py; needs root), raw sockets for the questions."""

from __future__ import annotations

import json
import os
import pwd
import socket
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pytest

from .accounts import IS_ROOT, Users, missing_tools
from .conftest import CLI, DESKDEX, ROOT
from .servers import free_port
from .test_shards import TOKEN, Served

SECRET = "wombatquill"  # in the account's private file only


def _ask(port: int, request: bytes, close_early: bool = False) -> bytes:
    """Send raw bytes; the status line answered (b"" when the server said nothing)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        if close_early:
            return b""
        try:
            return s.recv(65536).split(b"\r\n", 1)[0]
        except (TimeoutError, ConnectionError):
            return b""


def _post(path: str, body: bytes = b"{}", token: str | None = TOKEN, **headers: str) -> bytes:
    head = {"Host": "x", "Content-Length": str(len(body)), **headers}
    if token is not None:
        head["Authorization"] = f"Bearer {token}"
    return (f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head.items()) + "\r\n").encode() + body


def test_refused_questions_are_one_line_each_and_no_traceback(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "note.txt").write_text("the harbour fleet\n")
    home = tmp_path / "shard"
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.toml").write_text(f'token = "{TOKEN}"\n')
    CLI(home).run("index", str(docs))
    served = Served(CLI(home))
    try:
        port = served.port
        refused = [  # (request, expected status, what the log line says why)
            (_post("/stats", token=None), b"401", "a wrong or missing token"),
            (_post("/stats", token="not-the-token-at-all"), b"401", "a wrong or missing token"),
            (_post("/status"), b"404", "no such question: /status"),
            (_post("/stats", **{"Transfer-Encoding": "chunked"}), b"411", "a request with Content-Length"),
            (_post("/stats", b"", **{"Content-Length": str(1 << 30)}), b"413", "a request of 0 to"),
            (_post("/search", b"{not json"), b"400", "a question that is not deskdex's"),
            (_post("/search", json.dumps({"query": 5}).encode()), b"400", "Expected `str`, got `int` - at `$.query`"),
        ]
        for request, status, _ in refused:
            assert status in _ask(port, request)
        assert b"400" in _ask(port, b"GARBAGE\r\n\r\n")  # http.server's own refusal
        # Clients that leave before the answer: the server's write fails (a broken pipe, a reset).
        for request, _, _ in refused[:3]:
            _ask(port, request, close_early=True)
        _ask(port, _post("/search", b"{", **{"Content-Length": "100"}), close_early=True)
        time.sleep(0.5)
        # Still answering: a real question after all that.
        assert b"200" in _ask(port, _post("/stats", json.dumps({"terms": [["body", "fleet"]]}).encode()))
    finally:
        served.stop()
    log = served.log.read_text()
    assert "Traceback" not in log and "Exception occurred" not in log, log
    lines = log.splitlines()
    for request, status, why in refused:
        path = request.split(b" ", 2)[1].decode()
        said = [ln for ln in lines if f"refused POST {path} ({status.decode()}): " in ln and why in ln]
        assert said and all("127.0.0.1:" in ln for ln in said), (path, log)  # who, what, why
    assert any("Bad request syntax" in ln for ln in lines), log


needs_accounts = pytest.mark.skipif(not IS_ROOT or bool(missing_tools()),
                                    reason="needs root and useradd: a system daemon over a real account's home")


@pytest.fixture
def enterprise_home(open_dir: Path) -> Iterator[tuple[Path, Path]]:
    """A home indexed by a real system daemon (`deskdex daemon --system --once`) over one account."""
    users = Users()
    users.add(users.a)
    try:
        pw = pwd.getpwnam(users.a)
        private = Path(pw.pw_dir) / "private.txt"
        private.write_text(f"{SECRET} salary review\n")
        os.chown(private, pw.pw_uid, pw.pw_gid)
        private.chmod(0o600)
        home = open_dir / "system-home"
        (home / "config").mkdir(parents=True)
        (home / "config" / "config.toml").write_text(f'accounts = ["{users.a}"]\ntoken = "{TOKEN}"\n')
        yield home, private
    finally:
        users.remove()


def _system_index(home: Path) -> None:
    p = subprocess.run([DESKDEX, "--home", str(home), "daemon", "--system", "--once"], capture_output=True,
                       text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr


@needs_accounts
def test_serve_refuses_an_enterprise_home(enterprise_home: tuple[Path, Path]) -> None:
    home, _ = enterprise_home
    _system_index(home)
    port = free_port()
    p = subprocess.run([DESKDEX, "--home", str(home), "serve", "--listen", f"127.0.0.1:{port}"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode != 0, (p.stdout, p.stderr)
    assert "enterprise-mode" in p.stderr and "not served" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert "serving" not in p.stdout
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


@needs_accounts
def test_a_served_home_that_an_enterprise_daemon_indexes_later_answers_none_of_it(
        enterprise_home: tuple[Path, Path], open_dir: Path) -> None:
    """Served while it was a desktop index, then a system daemon indexes the home: the
    server, checked at its start only, would hand out the account's document; each answer is checked."""
    home, private = enterprise_home
    plain = open_dir / "plain"
    plain.mkdir()
    (plain / "note.txt").write_text("the harbour fleet\n")
    CLI(home).run("index", str(plain))  # a desktop index first: served
    served = Served(CLI(home))
    try:
        _system_index(home)
        front = open_dir / "front"
        (front / "config").mkdir(parents=True)
        (front / "config" / "config.toml").write_text(f'shards = ["{served.url}"]\ntoken = "{TOKEN}"\n')
        CLI(front).run("index", str(plain))
        searched = CLI(front).run("search", SECRET, "--json", check=False)
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as s:
            s.sendall(_post("/snippets", json.dumps({"query": SECRET, "uris": [private.as_uri()]}).encode()))
            snippets = s.recv(65536)
    finally:
        served.stop()
    assert searched.returncode != 0 and SECRET not in searched.stdout, (searched.stdout, searched.stderr)
    assert "enterprise-mode" in searched.stderr and "Traceback" not in searched.stderr, searched.stderr
    assert b" 403 " in snippets.split(b"\r\n", 1)[0] and SECRET.encode() not in snippets, snippets
    log = served.log.read_text()
    assert "refused POST /search (403)" in log and "Traceback" not in log, log
