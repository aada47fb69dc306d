"""`deskdex search` answered by the running daemon from a client that loads nothing heavy
(deskdex.clients.launch), with the same output as the full command line, and the full command line
whenever the fast path cannot read the command line exactly as argparse does."""

from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from deskdex.clients import launch
from deskdex.clients.cli import build_parser
from deskdex.clients.searchargs import parse_fast
from deskdex.paths import ENV, SOCKET_NAME, Home

from .conftest import DESKDEX
from .daemon_fixture import DaemonProcess

pytestmark = pytest.mark.slow  # daemons

HEAVY = ("argparse", "json", "typing", "dataclasses", "deskdex.clients.cli", "platformdirs", "deskdex.index",
         "tantivy", "re", "socket")
# Runs the console script's entry point as installed, then reports which heavy modules it loaded.
PROBE = ("import sys\nfrom deskdex.clients import launch\nsys.argv = ['deskdex', *sys.argv[1:]]\n"
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
    """``fast``: through the entry point, reporting what it loaded; else the full command line
    (``python -m deskdex.clients.cli``), which never takes the fast path."""
    env = dict(os.environ, DESKDEX_HOME=str(home), NO_COLOR="1")
    cmd = [sys.executable, "-I", "-c", PROBE, *args] if fast else [sys.executable, "-I", "-m", "deskdex.clients.cli",
                                                                   *args]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    loaded = p.stderr.rsplit("LOADED=", 1)[1].split(",") if "LOADED=" in p.stderr else []
    return p, [m for m in loaded if m]


@pytest.mark.parametrize("args", [
    ["search", "apples"],
    ["search", "apples", "--paths"],
    ["search", "apples", "--json"],
    ["search", "apples", "OR", "zeppelin", "--limit", "1", "--offset", "1", "--sort", "size", "--all"],
    ["search", "--limit=2", "apples", "pears"],
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
    (["search", "(apples"], 1, "never closed"),  # a bad query: the caret comes from the full command line
    (["search", "--help"], 0, "usage: deskdex search"),
    (["search", "apples", "--limit", "0"], 2, "must be"),
    (["search", "apples", "--lim", "2"], 0, "first 2 results of"),  # an abbreviation argparse takes
    (["status"], 0, "documents:"),
])
def test_what_the_fast_path_does_not_take_runs_the_full_command(daemon: DaemonProcess, args: list[str], code: int,
                                                                expect: str):
    p, loaded = run(args, daemon.home, fast=True)
    assert p.returncode == code, p.stderr
    assert expect in p.stdout + p.stderr and "Traceback" not in p.stderr
    assert "deskdex.clients.cli" in loaded


def test_without_a_daemon_the_index_is_read_without_the_full_command(tmp_path: Path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("lighthouse keeper's log\n")
    home = tmp_path / "home"
    p, _ = run(["index", str(docs)], home, fast=True)
    assert p.returncode == 0, p.stderr
    for args in (["search", "lighthouse", "--paths"], ["search", "lighthouse"], ["search", "--", "keeper"]):
        fast, loaded = run(args, home, fast=True)
        full, _ = run(args, home, fast=False)
        assert fast.returncode == full.returncode == 0 and fast.stdout == full.stdout, fast.stderr + full.stderr
        assert "deskdex.index" in loaded and "deskdex.clients.cli" not in loaded and "argparse" not in loaded
    assert "lighthouse [keeper]'s log" in fast.stdout  # the snippet, its match marked
    # No index here: the full command line says so (and would ask a system daemon).
    p, loaded = run(["search", "lighthouse"], tmp_path / "empty", fast=True)
    assert p.returncode != 0 and "deskdex.clients.cli" in loaded and "Traceback" not in p.stderr


WORDS = ["tomato", "soup", "-x", "--", "--all", "--json", "--paths", "--open", "1", "--limit", "3", "--limit=0",
         "--offset", "-2", "--sort", "date", "--sort=weight", "--home", "/h", "-v", "--lim", "search", "-0",
         "--null"]


def test_the_fast_reading_of_a_command_line_is_argparse_s_or_none():
    """Every command line the fast path takes means exactly what argparse makes of it; it may
    refuse (None) any it is unsure of, and must take the plain ones."""
    parser = build_parser()
    taken = 0
    for n in range(1, 4):
        for tail in itertools.product(WORDS, repeat=n):
            for argv in (["search", *tail], ["--home", "/h", "search", *tail], [*tail[:1], "search", *tail[1:]]):
                fast = parse_fast(argv)
                if fast is None:
                    continue
                taken += 1
                try:
                    with open(os.devnull, "w") as devnull, _stderr_to(devnull):
                        slow = vars(parser.parse_args(argv))
                except SystemExit:
                    raise AssertionError(f"the fast path took {argv}, which argparse refuses") from None
                expected = {k: slow.get(k) for k in fast if k != "home"}
                assert {k: v for k, v in fast.items() if k != "home"} == expected, argv
                assert fast["home"] == slow.get("home"), argv
    assert taken > 1000
    for plain in (["search", "tomato", "soup"], ["search", "soup", "--limit", "3", "--json"],
                  ["--home", "/h", "search", "--sort", "date", "soup"]):
        assert parse_fast(plain) is not None, plain


class _stderr_to:
    def __init__(self, f: object) -> None:
        self.f = f

    def __enter__(self) -> None:
        self.old, sys.stderr = sys.stderr, self.f

    def __exit__(self, *exc: object) -> None:
        sys.stderr = self.old


def test_socket_path_agrees_with_the_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(ENV, raising=False)
    assert launch.socket_path(str(tmp_path / "h")) == Home.resolve(str(tmp_path / "h")).socket
    monkeypatch.setenv(ENV, str(tmp_path / "env"))
    assert launch.socket_path(None) == Home.resolve().socket
    monkeypatch.delenv(ENV)
    runtime = tmp_path / "xdg"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert launch.socket_path(None) == Home.resolve().socket == str(runtime / "deskdex" / SOCKET_NAME)


def test_without_xdg_runtime_dir_nothing_warns_and_the_socket_is_found(daemon: DaemonProcess, tmp_path: Path):
    """ssh without pam_systemd, cron, containers: no RuntimeDirWarning, even with --home."""
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", ENV)}
    for args in (["--home", str(daemon.home), "status"], ["--home", str(daemon.home), "search", "apples"],
                 ["formats"]):
        p = subprocess.run([DESKDEX, *args], env=env, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0 and "Warning" not in p.stderr and p.stderr == "", (args, p.stderr)


def test_a_socket_in_a_folder_others_can_write_is_not_asked(tmp_path: Path):
    home = tmp_path / "home"
    (home / "run").mkdir(parents=True)
    os.chmod(home / "run", 0o777)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(home / "run" / SOCKET_NAME))
    listener.listen(1)
    listener.setblocking(False)
    args = parse_fast(["--home", str(home), "search", "x"])
    assert args is not None
    try:
        assert launch._through_daemon(args) is None
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
        os.chmod(home / "run", 0o700)
        # Now the folder is private: the client connects (and, this socket answering with an
        # error, hands over to the full command line).
        listener.setblocking(True)
        listener.settimeout(5)

        def answer() -> None:
            conn, _ = listener.accept()
            conn.recv(65536)
            conn.sendall(b'{"ok": false, "error": {"code": "unknown_op", "message": "no"}}\n')
            conn.close()

        t = threading.Thread(target=answer)
        t.start()
        assert launch._through_daemon(args) is None
        t.join(5)
        assert not t.is_alive()
    finally:
        listener.close()


def test_a_closed_pipe_is_not_an_error(daemon: DaemonProcess):
    env = dict(os.environ, DESKDEX_HOME=str(daemon.home))
    for args in (["status"], ["search", "apples"]):
        p = subprocess.run(f"'{DESKDEX}' {' '.join(args)} | head -c 1", shell=True, env=env, capture_output=True,
                           text=True, timeout=60)
        assert "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr, p.stderr
