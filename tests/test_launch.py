"""`deskdex search` answered by the running daemon from a client that loads nothing heavy
(daemon/launch.py), with the same output as the full command line, and the full command line
whenever the daemon does not take the command."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from daemon import launch
from daemon.paths import Home

from .conftest import ROOT
from .daemon_fixture import DaemonProcess

HEAVY = ("argparse", "json", "daemon.cli", "daemon.paths", "platformdirs", "index", "tantivy", "re")
# Runs daemon/launch.py as the console script does, then reports which heavy modules it loaded.
PROBE = ("import sys\nfrom daemon import launch\nsys.argv = ['deskdex', *sys.argv[1:]]\n"
         "try:\n    rc = launch.main()\nexcept SystemExit as exc:\n    rc = exc.code\n"
         f"sys.stderr.write('\\nLOADED=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))\nsys.exit(rc)")


@pytest.fixture
def daemon(tmp_path: Path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.txt").write_text("shopping list: apples and pears\n")
    (docs / "plan.txt").write_text("the alpha plan needs apples and a zeppelin\n")
    (docs / "ünïcode.txt").write_text("apples from the orchard, «quoted» and 東京\n")
    d = DaemonProcess(tmp_path / "home", [docs]).start()
    yield d
    d.stop()


def run(args: list[str], home: Path, fast: bool) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    env = dict(os.environ, DESKDEX_HOME=str(home), NO_COLOR="1")
    cmd = [sys.executable, "-c", PROBE, *args] if fast else [sys.executable, "-m", "daemon.cli", *args]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    loaded = p.stderr.rsplit("LOADED=", 1)[1].split(",") if "LOADED=" in p.stderr else []
    return p, [m for m in loaded if m]


@pytest.mark.parametrize("args", [
    ["search", "apples"],
    ["search", "apples", "--paths"],
    ["search", "apples", "--json"],
    ["search", "apples", "OR", "zeppelin", "--limit", "1", "--offset", "1", "--sort", "size", "--all"],
    ["search", "東京"],
    ["search", "nothing-matches-this"],
])
def test_the_daemon_answers_as_the_full_command_would(daemon: DaemonProcess, args: list[str]):
    fast, loaded = run(args, daemon.home, fast=True)
    full, _ = run(args, daemon.home, fast=False)
    assert fast.returncode == full.returncode == 0, fast.stderr + full.stderr
    assert fast.stdout == full.stdout and fast.stdout
    assert loaded == [], f"the fast path loaded {loaded}"
    if "--json" in args:
        assert {Path(h["path"]).name for h in json.loads(fast.stdout)["hits"]} == {
            "notes.txt", "plan.txt", "ünïcode.txt"}


@pytest.mark.parametrize("args, code, expect", [
    (["search", "(apples"], 1, "never closed"),  # a bad query: the caret comes from daemon.cli
    (["search", "--help"], 0, "usage: deskdex search"),
    (["search", "apples", "--limit", "0"], 2, "must be"),
    (["status"], 0, "documents:"),
])
def test_what_the_daemon_does_not_take_runs_the_full_command(daemon: DaemonProcess, args: list[str], code: int,
                                                             expect: str):
    p, loaded = run(args, daemon.home, fast=True)
    assert p.returncode == code, p.stderr
    assert expect in p.stdout + p.stderr and "Traceback" not in p.stderr
    assert "daemon.cli" in loaded


def test_without_a_daemon_the_full_command_searches(tmp_path: Path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("lighthouse keeper's log\n")
    home = tmp_path / "home"
    p, _ = run(["index", str(docs)], home, fast=True)
    assert p.returncode == 0, p.stderr
    p, loaded = run(["search", "lighthouse", "--paths"], home, fast=True)
    assert p.returncode == 0 and p.stdout == f"{docs / 'a.txt'}\n"
    assert "daemon.cli" in loaded


def test_socket_path_agrees_with_the_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(launch.ENV, raising=False)
    assert launch.socket_path(["--home", str(tmp_path / "h"), "search", "x"]) == Home.resolve(str(tmp_path / "h")).socket
    assert launch.socket_path(["search", "x", f"--home={tmp_path}/h2"]) == Home.resolve(f"{tmp_path}/h2").socket
    monkeypatch.setenv(launch.ENV, str(tmp_path / "env"))
    assert launch.socket_path(["search", "x"]) == Home.resolve().socket
    monkeypatch.delenv(launch.ENV)
    runtime = tmp_path / "xdg"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert launch.socket_path(["search", "x"]) == Home.resolve().socket


def test_a_socket_in_a_folder_others_can_write_is_not_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    home = tmp_path / "home"
    (home / "run").mkdir(parents=True)
    os.chmod(home / "run", 0o777)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(home / "run" / launch.SOCKET_NAME))
    listener.listen(1)
    listener.setblocking(False)
    try:
        assert launch._through_daemon(["--home", str(home), "search", "x"]) is None
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
        os.chmod(home / "run", 0o700)
        # Now the folder is private: the client connects (and, this socket never answering
        # sensibly, hands over to the full command line).
        listener.setblocking(True)
        listener.settimeout(5)
        import threading

        def answer() -> None:
            conn, _ = listener.accept()
            conn.recv(65536)
            conn.sendall(b'{"ok": false, "error": {"code": "unknown_op", "message": "no"}}\n')
            conn.close()

        t = threading.Thread(target=answer)
        t.start()
        assert launch._through_daemon(["--home", str(home), "search", "x"]) is None
        t.join(5)
        assert not t.is_alive()
    finally:
        listener.close()


def test_a_closed_pipe_is_not_an_error(daemon: DaemonProcess):
    env = dict(os.environ, DESKDEX_HOME=str(daemon.home))
    for args in (["status"], ["search", "apples"]):
        p = subprocess.run(f"'{sys.executable}' -m daemon.launch {' '.join(args)} | head -c 1",
                           shell=True, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr, p.stderr
