"""The live daemon as a user runs it: a real process, real inotify, the real socket."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import DESKDEX, ROOT
from .daemon_fixture import BUSY_TIMEOUT, CLIENT_TIMEOUT, DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUSY_TIMEOUT)]  # the daemon's waits are measured in daemon_fixture.Patience


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    d = tmp_path / "docs"
    (d / "projects" / "alpha").mkdir(parents=True)
    (d / "notes.txt").write_text("shopping list: apples and pears\n")
    (d / "projects" / "alpha" / "plan.txt").write_text("the alpha plan needs a zeppelin\n")
    return d


@pytest.fixture
def daemon(tmp_path: Path, docs: Path):
    d = DaemonProcess(tmp_path / "home", [docs]).start()
    yield d
    d.stop()


def test_changes_are_followed_live(daemon: DaemonProcess, docs: Path, tmp_path: Path):
    assert daemon.search("apples") == [str(docs / "notes.txt")]
    converted = daemon.call("status")["converted"]

    # Created, then modified.
    new = docs / "letter.txt"
    new.write_text("dear aunt, thank you for the marmalade\n")
    daemon.eventually("marmalade", [str(new)])
    new.write_text("dear aunt, thank you for the chutney\n")
    daemon.eventually("chutney", [str(new)])
    daemon.eventually("marmalade", [])

    # An editor's save: write a temp file, then rename it over the real one.
    tmp = docs / ".notes.txt.swp"
    tmp.write_text("shopping list: apples and quinces\n")
    os.replace(tmp, docs / "notes.txt")
    daemon.eventually("quinces", [str(docs / "notes.txt")])
    assert daemon.search("swp") == []

    # Renames and moves of files and folders are metadata updates, not conversions.
    before = daemon.call("status")["converted"]
    os.rename(new, docs / "thanks.txt")
    daemon.eventually("chutney", [str(docs / "thanks.txt")])
    os.rename(docs / "projects", docs / "work")
    daemon.eventually("zeppelin", [str(docs / "work" / "alpha" / "plan.txt")])
    assert daemon.call("status")["converted"] == before

    # A folder moved out of the tree disappears; a deleted file too.
    shutil.move(str(docs / "work"), str(tmp_path / "elsewhere"))
    daemon.eventually("zeppelin", [])
    (docs / "thanks.txt").unlink()
    daemon.eventually("chutney", [])
    # Idle, with nothing queued: a folder that appeared is walked once more 2 s later (RELOOK_AFTER).
    st = daemon.wait_for(lambda st: st["state"] == "idle" and st["queue"] == 0, what="idle after the last change")
    assert st["converted"] >= converted


def test_pause_resume_watch_and_exclude(daemon: DaemonProcess, docs: Path, tmp_path: Path):
    env = dict(os.environ, DESKDEX_HOME=str(daemon.home))

    def cli(*args: str) -> str:
        p = subprocess.run([DESKDEX, *args], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=CLIENT_TIMEOUT)
        assert p.returncode == 0, p.stderr
        return p.stdout

    assert "paused" in cli("pause")
    assert daemon.call("status")["state"] == "paused"
    (docs / "later.txt").write_text("written while paused: a walrus\n")
    # The watcher hands the change over (on a busy machine that takes a while: wait for it), and
    # it stays queued, not indexed, for as long as the daemon is paused.
    daemon.wait_for(lambda st: st["queue"] >= 1, what="the change queued while paused")
    held = time.monotonic() + 1.0
    while time.monotonic() < held:
        st = daemon.call("status")
        assert st["state"] == "paused" and st["queue"] >= 1, st
        assert daemon.search("walrus") == []
        time.sleep(0.1)
    cli("resume")
    daemon.eventually("walrus", [str(docs / "later.txt")])

    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "far.txt").write_text("a far away lighthouse\n")
    assert str(extra) in cli("watch", "add", str(extra))
    daemon.eventually("lighthouse", [str(extra / "far.txt")])
    (extra / "near.txt").write_text("a nearby lighthouse\n")
    daemon.eventually("lighthouse", [str(extra / "far.txt"), str(extra / "near.txt")])

    cli("exclude", "add", "near.txt")
    daemon.eventually("lighthouse", [str(extra / "far.txt")])
    assert "near.txt" in cli("exclude", "list")
    listed = cli("watch", "list")
    assert str(docs) in listed and str(extra) in listed

    cli("watch", "remove", str(extra))
    daemon.eventually("lighthouse", [])
    st = cli("status")
    assert "running" in st and "documents:" in st


def test_cli_searches_through_the_daemon_and_status_json(daemon: DaemonProcess, docs: Path):
    env = dict(os.environ, DESKDEX_HOME=str(daemon.home))
    p = subprocess.run([DESKDEX, "search", "apples", "--json"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=CLIENT_TIMEOUT)
    assert p.returncode == 0 and '"notes.txt"' not in p.stderr
    import json

    res = json.loads(p.stdout)
    assert [h["path"] for h in res["hits"]] == [str(docs / "notes.txt")] and res["total"] == 1
    st = json.loads(subprocess.run([DESKDEX, "status", "--json"], cwd=ROOT, env=env,
                                   capture_output=True, text=True, timeout=CLIENT_TIMEOUT).stdout)
    assert st["daemon"] is True and st["state"] in ("idle", "indexing", "scanning", "paused")
    assert isinstance(st["queue"], int) and st["documents"] == 2 and st["cpu_seconds"] >= 0
    bad = subprocess.run([DESKDEX, "search", "(apples"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=CLIENT_TIMEOUT)
    assert bad.returncode == 1 and "never closed" in bad.stderr and "Traceback" not in bad.stderr


def test_second_daemon_on_the_same_home_says_so(daemon: DaemonProcess):
    env = dict(os.environ, DESKDEX_HOME=str(daemon.home))
    p = subprocess.run([DESKDEX, "daemon"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=CLIENT_TIMEOUT)
    assert p.returncode != 0 and "already runs" in p.stderr and "Traceback" not in p.stderr


def test_private_files_and_socket(daemon: DaemonProcess):
    home = daemon.home
    for d in ("config", "data", "run"):
        assert (home / d).stat().st_mode & 0o777 == 0o700, d
    assert Path(daemon.socket).stat().st_mode & 0o777 == 0o600
    assert (home / "data" / "catalog.sqlite").stat().st_mode & 0o777 == 0o600


def test_catch_up_after_downtime_and_sigterm(tmp_path: Path, docs: Path):
    d = DaemonProcess(tmp_path / "home", [docs]).start()
    assert d.stop(signal.SIGTERM) == 0
    # Changes while the daemon is down.
    (docs / "notes.txt").unlink()
    (docs / "fresh.txt").write_text("made while the daemon slept: an okapi\n")
    os.rename(docs / "projects", docs / "old-projects")
    d.start()
    try:
        assert d.search("apples") == []
        assert d.search("okapi") == [str(docs / "fresh.txt")]
        assert d.search("zeppelin") == [str(docs / "old-projects" / "alpha" / "plan.txt")]
    finally:
        d.stop()


def test_unmounted_folder_is_kept_offline(tmp_path: Path, docs: Path):
    d = DaemonProcess(tmp_path / "home", [docs]).start()
    try:
        gone = tmp_path / "unplugged"
        d.stop()
        shutil.move(str(docs), str(gone))
        d.start()
        st = d.call("status")
        assert str(docs) in st["offline"] and st["documents"] == 2
        assert d.search("apples") == [str(docs / "notes.txt")]
    finally:
        d.stop()


def _forkservers(pid: int) -> list[int]:
    return [k for k in _children(pid) if "forkserver" in Path(f"/proc/{k}/cmdline").read_text()]


def _thread_names(pid: int) -> list[str]:
    out = []
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            out.append(Path(f"/proc/{pid}/task/{t}/comm").read_text().strip())
        except OSError:
            pass
    return out


def _children(pid: int) -> list[int]:
    kids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    kids.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return kids


def test_an_idle_daemon_lets_go_and_comes_back(tmp_path: Path, docs: Path):
    d = DaemonProcess(tmp_path / "home", [docs], extra_config="release_after = 0.5\nwarm_for = 1.5\n").start()
    try:
        pid = d.call("status")["pid"]
        patience = d.patience()  # release_after is 0.5 s of the daemon's time, at idle priority
        while not patience.over() and any("tantivy" in t for t in _thread_names(pid)):
            time.sleep(0.2)
        # Quiet: no tantivy thread (one of them polls twice a second), no converter process, and
        # after warm_for no fork server holding the converters' modules (50 MiB).
        assert not any("tantivy" in t for t in _thread_names(pid)), _thread_names(pid)
        # Converters are forked by the fork server: its children (the same command line as it).
        assert not [k for server in _forkservers(pid) for k in _children(server)]
        patience = d.patience()
        while not patience.over() and _forkservers(pid):
            time.sleep(0.2)
        assert not _forkservers(pid)
        # And it all comes back for a change and a search.
        (docs / "back.txt").write_text("the narwhal returns\n")
        d.eventually("narwhal", [str(docs / "back.txt")])
        assert d.search("apples") == [str(docs / "notes.txt")]
    finally:
        d.stop()


def _threads(pid: int) -> list[tuple[int, int, int]]:
    """(tid, nice, scheduling policy) of each thread, from /proc (Linux)."""
    out = []
    for tid in sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")):
        try:
            fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended meanwhile
        out.append((tid, int(fields[16]), int(fields[38])))  # fields 19 (nice) and 41 (policy)
    return out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread priority is read from /proc (Linux)")
def test_searches_are_answered_while_the_cpu_is_busy(daemon: DaemonProcess, docs: Path):
    pid = daemon.proc.pid
    threads = _threads(pid)
    main = next(t for t in threads if t[0] == pid)
    assert main[1] == 19 and main[2] == os.SCHED_IDLE, threads  # the indexing thread yields
    assert any(t[2] == os.SCHED_OTHER for t in threads), threads  # the socket's thread does not
    # Busy programs on every core at normal priority: an idle-priority thread gets almost
    # nothing while they run, a normal one its fair share.
    hog = "import time\nend = time.time() + 30\nwhile time.time() < end: pass\n"
    hogs = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range((os.cpu_count() or 1) * 2)]
    try:
        time.sleep(1.0)
        took = []
        for _ in range(5):
            t = time.monotonic()
            found = daemon.call("search", query="apples")
            took.append(time.monotonic() - t)
            assert [Path(h["path"]).name for h in found["hits"]] == ["notes.txt"]
        assert sorted(took)[2] < 0.5, f"search took {took} s while the CPU was busy"
    finally:
        for h in hogs:
            h.kill()
            h.wait()


def test_the_account_watcher_leaves_no_thread_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Enterprise mode's watch on the account files, in this process: a change is seen, a reload
    schedules its second looks (timers, since useradd makes the home after writing /etc/passwd),
    and stop() ends every thread it started, the timers not yet due included. Account files of
    our own stand in for /etc/passwd and /etc/group, which a test must not rewrite."""
    import threading

    from deskdex.daemon import accounts

    passwd, group = tmp_path / "passwd", tmp_path / "group"
    passwd.write_text("root:x:0:0:root:/root:/bin/sh\n")
    group.write_text("root:x:0:\n")
    monkeypatch.setattr(accounts, "ACCOUNT_FILES", (str(passwd), str(group)))
    seen = threading.Event()
    before = set(threading.enumerate())
    watcher = accounts.AccountWatcher(["root"], seen.set)
    watcher.start()
    try:
        new = tmp_path / "passwd.new"  # replaced, not edited in place, as useradd does
        new.write_text("root:x:0:0:root:/root:/bin/sh\nada:x:1000:1000::/home/ada:/bin/sh\n")
        os.replace(new, passwd)
        assert seen.wait(CLIENT_TIMEOUT), "the change of the account file was not seen"
        assert watcher.reload()  # the stamp changed: read again, and look again later
        assert any(isinstance(t, threading.Timer) for t in threading.enumerate())
    finally:
        watcher.stop()
    assert [t for t in threading.enumerate() if t not in before and t.is_alive()] == []
