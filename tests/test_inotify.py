"""Our inotify watcher on the kernel's interface (pipeline/inotify.py, pipeline/treewatch.py), with
real inotify on real folders: the records read from the descriptor, renames paired by cookie,
folders made or moved in and what they held before their watch, queue overflow, the watch limit,
unmounts, names that are not UTF-8, many roots on one descriptor, the folder watch of the config
and account files, and watchdog's public observer for the other platforms.

A ``TreeWatch`` not started yet reads nothing: whatever the test does before ``start()`` is queued
by the kernel and read in one go, as a busy daemon reads it, so the order is certain."""

from __future__ import annotations

import errno
import os
import shutil
import struct
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from deskdex.pipeline import inotify as k
from deskdex.pipeline.treewatch import PAIR_WAIT, FsEvent, TreeWatch

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


class Events:
    """A TreeWatch handler that keeps every event and lets a test wait for one."""

    def __init__(self) -> None:
        self.got: list[FsEvent] = []
        self.cond = threading.Condition()

    def __call__(self, ev: FsEvent) -> None:
        with self.cond:
            self.got.append(ev)
            self.cond.notify_all()

    def wait_for(self, wanted: FsEvent, timeout: float = 10.0) -> list[FsEvent]:
        deadline = time.monotonic() + timeout
        with self.cond:
            while wanted not in self.got:
                left = deadline - time.monotonic()
                assert left > 0, f"no {wanted} in {self.got}"
                self.cond.wait(left)
            return list(self.got)

    def quiet(self, seconds: float = PAIR_WAIT + 0.5) -> list[FsEvent]:
        """Everything, once nothing came for ``seconds`` (a move out waits ``PAIR_WAIT`` for its pair)."""
        with self.cond:
            seen = -1
            while seen != len(self.got):
                seen = len(self.got)
                self.cond.wait(seconds)
            return list(self.got)


@pytest.fixture
def tree(tmp_path: Path):
    """(root, outside, events, watch): ``root`` watched, not started yet."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.txt").write_text("a")
    outside.mkdir()
    events = Events()
    watch = TreeWatch(events)
    watch.add_root(str(root))
    yield root, outside, events, watch
    watch.stop()


def ev(kind: str, path: Path | str, is_dir: bool = False, dest: Path | str = "", reason: str = "") -> FsEvent:
    return FsEvent(kind, str(path), is_dir, str(dest) if dest else "", reason)


# -- the kernel interface ------------------------------------------------------------------------

def test_parse_reads_each_record_and_keeps_the_names_bytes():
    def record(wd: int, mask: int, cookie: int, name: bytes) -> bytes:
        padded = name + b"\0" * (16 - len(name) % 16) if name else b""  # the kernel pads to 16
        return struct.pack("iIII", wd, mask, cookie, len(padded)) + padded

    buf = (record(1, k.IN_CREATE, 0, b"caf\xe9.txt") + record(2, k.IN_DELETE_SELF, 0, b"")
           + record(-1, k.IN_Q_OVERFLOW, 0, b"") + record(3, k.IN_MOVED_TO | k.IN_ISDIR, 77, b"d"))
    got = k.parse(buf)
    assert got == [k.RawEvent(1, k.IN_CREATE, 0, b"caf\xe9.txt"), k.RawEvent(2, k.IN_DELETE_SELF, 0, b""),
                   k.RawEvent(-1, k.IN_Q_OVERFLOW, 0, b""), k.RawEvent(3, k.IN_MOVED_TO | k.IN_ISDIR, 77, b"d")]
    assert got[3].is_dir and not got[0].is_dir


def test_read_waits_for_events_times_out_and_wakes_for_good(tmp_path: Path):
    fd = k.Inotify()
    try:
        wd = fd.add_watch(str(tmp_path), k.IN_CREATE)
        started = time.monotonic()
        assert fd.read(0.2) == []
        assert time.monotonic() - started >= 0.2
        (tmp_path / "x").write_text("x")
        assert fd.read(5) == [k.RawEvent(wd, k.IN_CREATE, 0, b"x")]
        assert fd.add_watch(str(tmp_path), k.IN_CREATE) == wd  # the same folder: the same watch
        with pytest.raises(OSError) as exc:
            fd.add_watch(str(tmp_path / "absent"), k.IN_CREATE)
        assert exc.value.errno == errno.ENOENT and "absent" in str(exc.value)
        result: list = []
        reader = threading.Thread(target=lambda: result.append(fd.read()))  # no timeout: blocks
        reader.start()
        time.sleep(0.1)
        assert reader.is_alive()
        fd.wake()
        reader.join(5)
        assert result == [None] and fd.read() is None  # and from then on
        fd.rm_watch(wd)
        fd.rm_watch(wd)  # gone already: no error
    finally:
        fd.close()


# -- renames paired by cookie ------------------------------------------------------------------

def test_a_rename_inside_the_tree_is_one_move_and_the_watches_follow(tree):
    root, _, events, watch = tree
    os.rename(root / "docs", root / "papers")
    os.rename(root / "papers" / "a.txt", root / "papers" / "b.txt")
    watch.start()
    (root / "papers" / "c.txt").write_text("c")  # named where its folder is now
    got = events.wait_for(ev("changed", root / "papers" / "c.txt"))
    assert got[:3] == [ev("moved", root / "docs", True, root / "papers"),
                       ev("moved", root / "papers" / "a.txt", False, root / "papers" / "b.txt"),
                       ev("created", root / "papers" / "c.txt")], got


def test_a_move_out_is_a_delete_and_its_watches_go(tree):
    root, outside, events, watch = tree
    (root / "docs" / "sub").mkdir()
    watch.add_root(str(root))  # already watched: nothing changes
    watch.start()
    assert events.quiet() == [ev("created", root / "docs" / "sub", True)]
    before = watch.watches
    os.rename(root / "docs", outside / "docs")
    (outside / "docs" / "sub" / "late.txt").write_text("out of the tree")
    got = events.quiet()[1:]
    assert got == [ev("deleted", root / "docs", True)], got  # nothing names the old paths afterwards
    assert watch.watches == before - 2


def test_a_move_in_is_a_create_of_the_tree(tree):
    root, outside, events, watch = tree
    (outside / "m" / "sub").mkdir(parents=True)
    (outside / "m" / "f.txt").write_text("f")
    (outside / "m" / "sub" / "g.txt").write_text("g")
    watch.start()
    os.rename(outside / "m", root / "m")
    os.rename(outside, root / "docs" / "o")  # now empty
    got = events.quiet()
    assert sorted(got, key=repr) == sorted([
        ev("created", root / "m", True), ev("created", root / "m" / "f.txt"), ev("created", root / "m" / "sub", True),
        ev("created", root / "m" / "sub" / "g.txt"), ev("created", root / "docs" / "o", True)], key=repr), got
    (root / "m" / "sub" / "h.txt").write_text("h")  # watched
    events.wait_for(ev("changed", root / "m" / "sub" / "h.txt"))


def test_a_move_from_one_root_to_another_is_one_move(tmp_path: Path):
    events = Events()
    watch = TreeWatch(events)
    try:
        roots = [tmp_path / f"r{i}" for i in range(50)]
        for r in roots:
            (r / "d").mkdir(parents=True)
        fds = _inotify_fds()
        for r in roots:
            watch.add_root(str(r))
        assert _inotify_fds() == fds and watch.watches == 100  # one descriptor for every root
        watch.start()
        os.rename(roots[3] / "d", roots[40] / "e")
        (roots[40] / "e" / "x.txt").write_text("x")
        got = events.wait_for(ev("changed", roots[40] / "e" / "x.txt"))
        assert got[0] == ev("moved", roots[3] / "d", True, roots[40] / "e"), got
    finally:
        watch.stop()


def test_nested_roots_share_their_watches_and_removing_the_outer_keeps_the_inner(tmp_path: Path):
    outer = tmp_path / "outer"
    inner = outer / "inner"
    (inner / "deep").mkdir(parents=True)
    (outer / "other").mkdir()
    events = Events()
    watch = TreeWatch(events).start()
    try:
        watch.add_root(str(inner))
        watch.add_root(str(outer))
        assert watch.watches == 4
        watch.remove_root(str(outer))
        assert watch.watches == 2  # inner and inner/deep
        (outer / "other" / "gone.txt").write_text("not watched now")
        (inner / "deep" / "kept.txt").write_text("still watched")
        got = events.wait_for(ev("changed", inner / "deep" / "kept.txt"))
        assert all("gone.txt" not in e.path for e in got), got
        watch.remove_root(str(inner))
        assert watch.watches == 0
    finally:
        watch.stop()


# -- what was missed before a watch existed ------------------------------------------------------

def test_a_folder_made_and_filled_before_it_is_read_has_its_files_reported(tree):
    root, _, events, watch = tree
    (root / "new" / "deeper").mkdir(parents=True)
    (root / "new" / "f.txt").write_text("f")
    (root / "new" / "deeper" / "g.txt").write_text("g")
    watch.start()
    got = events.quiet()
    for path in (root / "new" / "f.txt", root / "new" / "deeper" / "g.txt"):
        assert ev("created", path) in got, got
    (root / "new" / "deeper" / "h.txt").write_text("h")
    events.wait_for(ev("changed", root / "new" / "deeper" / "h.txt"))


def test_a_folder_made_while_its_parent_is_renamed_is_watched_where_it_went(tree):
    """Hole 2: its watch was asked for at the path its event names, gone by then."""
    root, _, events, watch = tree
    (root / "docs" / "x" / "y").mkdir(parents=True)
    (root / "docs" / "x" / "y" / "deep.txt").write_text("d")
    os.rename(root / "docs", root / "papers")
    watch.start()
    got = events.quiet()
    assert ev("moved", root / "docs", True, root / "papers") in got
    assert ev("created", root / "papers" / "x" / "y" / "deep.txt") in got, got
    (root / "papers" / "x" / "y" / "later.txt").write_text("l")
    events.wait_for(ev("changed", root / "papers" / "x" / "y" / "later.txt"))


def test_a_folder_found_at_a_new_place_before_its_rename_is_read_has_its_files_reported(tree):
    """A walk of a folder watched late (its parent was renamed before the events were read) finds
    a watched folder that a rename still queued brought there, from a folder not watched when it
    happened: that rename reads as a move out, the delete of the old path. What the folder holds
    must be reported at its new place (it was not: seed 1403 of tests/live_burst.py lost a file)."""
    root, _, events, watch = tree
    watch.stop()
    (root / "p").mkdir()
    events = Events()
    watch = TreeWatch(events)
    try:
        watch.add_root(str(root))
        (root / "p" / "l").mkdir()  # its watch is asked for after the rename below: too late
        os.rename(root / "p", root / "q")
        os.rename(root / "docs", root / "q" / "l" / "i")  # from a watched folder to one not yet watched
        watch.start()
        got = events.quiet()
        assert ev("deleted", root / "docs", True) in got, got
        assert ev("created", root / "q" / "l" / "i" / "a.txt") in got, got
        (root / "q" / "l" / "i" / "b.txt").write_text("b")  # and it is still watched, under its new path
        events.wait_for(ev("changed", root / "q" / "l" / "i" / "b.txt"))
    finally:
        watch.stop()


def test_names_that_are_not_utf8(tree):
    root, outside, events, watch = tree
    raw = os.fsencode(root / "docs") + b"/caf\xe9.txt"
    with open(raw, "wb") as f:
        f.write(b"x")
    moved = os.fsencode(outside) + b"/d\xff"
    os.mkdir(moved)
    with open(moved + b"/n\xfe.txt", "wb") as f:
        f.write(b"y")
    watch.start()
    os.rename(moved, os.fsencode(root) + b"/d\xff")
    got = events.quiet()
    assert ev("created", os.fsdecode(raw)) in got, got
    assert ev("created", os.fsdecode(os.fsencode(root) + b"/d\xff/n\xfe.txt")) in got, got
    assert all(os.path.lexists(os.fsencode(e.path)) for e in got if e.kind == "created")  # the exact bytes


# -- lost events -------------------------------------------------------------------------------

def test_queue_overflow_is_reported_and_the_watches_caught_up(tree):
    root, _, events, watch = tree
    with open("/proc/sys/fs/inotify/max_queued_events") as f:
        limit = int(f.read())
    if limit > 200_000:
        pytest.skip(f"max_queued_events is {limit}: overflowing it would take too long")
    for i in range(limit // 2 + 100):  # created + modified + closed: 3 events a file
        (root / "docs" / f"f{i}.txt").write_text("x")
    (root / "made" / "inside").mkdir(parents=True)  # after the overflow: no event of its own
    os.rename(root / "docs", root / "papers")  # lost too: the watch's path must be corrected
    watch.start()
    events.wait_for(ev("lost", "", reason="overflow"), timeout=60)
    assert watch.watches == 4  # root, papers, made, made/inside
    (root / "made" / "inside" / "n.txt").write_text("n")
    (root / "papers" / "p.txt").write_text("p")
    events.wait_for(ev("changed", root / "made" / "inside" / "n.txt"))
    events.wait_for(ev("changed", root / "papers" / "p.txt"))


LIMIT_CHILD = textwrap.dedent("""
    import json, os, sys
    from deskdex.pipeline.treewatch import TreeWatch
    got = []
    w = TreeWatch(got.append)
    w.add_root(sys.argv[1])
    try:
        w.add_root(sys.argv[2])
    except OSError as exc:
        got.append(exc.errno)
    print(json.dumps([[e.kind, e.path, e.reason] if hasattr(e, "kind") else e for e in got] + [w.watches]))
    w.stop()
""")


def test_the_watch_limit_is_reported_never_a_crash(tmp_path: Path):
    """ENOSPC for real: a user namespace whose inotify watch limit is 3 (leaves the host alone)."""
    if not shutil.which("unshare"):
        pytest.skip("unshare (util-linux) is not installed")
    probe = subprocess.run(["unshare", "-U", "-r", "sh", "-c", "echo 3 > /proc/sys/user/max_inotify_watches"],
                           capture_output=True, text=True)
    if probe.returncode:
        pytest.skip(f"cannot make a user namespace with its own inotify limit: {probe.stderr.strip()}")
    root, other = tmp_path / "w", tmp_path / "other"
    for i in range(6):
        (root / f"d{i}").mkdir(parents=True)
    other.mkdir()
    out = subprocess.run(["unshare", "-U", "-r", "sh", "-c",
                          'echo 3 > /proc/sys/user/max_inotify_watches && exec "$@"', "sh",
                          sys.executable, "-c", LIMIT_CHILD, str(root), str(other)],
                         capture_output=True, text=True, timeout=60, cwd=Path(__file__).parent.parent)
    assert out.returncode == 0, out.stderr
    import json

    got = json.loads(out.stdout)
    assert got[0][0] == "lost" and got[0][2] == "watch_limit" and got[0][1].startswith(str(root)), got
    assert got[1] == errno.ENOSPC and got[2] == 3, got  # the second root refused; three watches held


def test_an_unmount_below_a_watched_folder_is_rescanned_and_watched_again(tmp_path: Path):
    if os.geteuid() != 0:
        pytest.skip("mounting needs root")
    root = tmp_path / "root"
    mnt = root / "mnt"
    mnt.mkdir(parents=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"cannot mount tmpfs here: {r.stderr.strip()}")
    try:
        (mnt / "inner").mkdir()
        events = Events()
        watch = TreeWatch(events).start()
        try:
            watch.add_root(str(root))
            assert watch.watches == 3
            subprocess.run(["umount", str(mnt)], check=True)
            events.wait_for(ev("lost", mnt, True, reason="unmounted"))
            (mnt / "under.txt").write_text("the folder below the mount point")
            events.wait_for(ev("created", mnt / "under.txt"))
            assert watch.watches == 2  # root and mnt: the tmpfs's watches are gone (IN_IGNORED)
        finally:
            watch.stop()
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_watched_folder_deleted_or_moved_away_is_reported(tmp_path: Path):
    a, b = tmp_path / "a", tmp_path / "b"
    (a / "sub").mkdir(parents=True)
    b.mkdir()
    events = Events()
    watch = TreeWatch(events).start()
    try:
        watch.add_root(str(a))
        watch.add_root(str(b))
        shutil.rmtree(a)
        os.rename(b, tmp_path / "b2")
        got = events.quiet()
        assert ev("deleted", a, True) in got and ev("deleted", b, True) in got, got
        (tmp_path / "b2" / "x.txt").write_text("x")
        assert events.quiet() == got  # a root moved away is no longer followed under its old path
        assert watch.watches == 0
    finally:
        watch.stop()


# -- the config and account files --------------------------------------------------------------

def test_folder_watch_follows_named_files_and_says_when_the_folder_goes(tmp_path: Path):
    folder = tmp_path / "etc"
    folder.mkdir()
    changes, gone = threading.Semaphore(0), threading.Event()
    watch = k.FolderWatch(str(folder), ["passwd"], changes.release, gone.set).start()
    try:
        (folder / "other").write_text("not ours")
        assert not changes.acquire(timeout=0.3)
        (folder / "passwd.new").write_text("root:x:0:0::/root:/bin/sh\n")
        os.replace(folder / "passwd.new", folder / "passwd")  # as useradd does
        assert changes.acquire(timeout=5)
        shutil.rmtree(folder)
        assert gone.wait(5)
    finally:
        watch.stop()


# -- watchdog, for the other platforms --------------------------------------------------------

def test_the_portable_watcher_uses_watchdogs_public_observer(tmp_path: Path):
    """The path macOS and Windows take, run here on watchdog's Linux observer."""
    pytest.importorskip("watchdog")
    from deskdex.pipeline.coalesce import Changed, Deleted, Moved
    from deskdex.pipeline.watch import Watcher

    root = tmp_path / "w"
    (root / "d").mkdir(parents=True)
    (root / "d" / "a.txt").write_text("a")
    batches: list = []
    got = threading.Event()

    def sink(records: list) -> None:
        batches.extend(records)
        got.set()

    with Watcher(sink, debounce=0.2, portable=True) as w:
        assert w.add(str(root))
        (root / "d" / "b.txt").write_text("b")
        os.rename(root / "d" / "a.txt", root / "d" / "c.txt")
        (root / "x.txt").write_text("x")
        (root / "x.txt").unlink()
        deadline = time.monotonic() + 10
        want = {Changed(str(root / "d" / "b.txt"), True), Moved(str(root / "d" / "a.txt"), str(root / "d" / "c.txt")),
                Deleted(str(root / "x.txt"))}
        while not want <= set(batches) and time.monotonic() < deadline:
            got.wait(0.5)
            got.clear()
    assert want <= set(batches), batches
    assert "watchdog.observers.inotify_c" in sys.modules  # it really ran watchdog's observer


def test_linux_watching_never_loads_watchdog():
    code = ("import sys, tempfile; from deskdex.pipeline.watch import Watcher; w = Watcher(print).start(); "
            "w.add(tempfile.mkdtemp()); w.stop(); print(sorted(m for m in sys.modules if m.startswith('watchdog')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out


def _inotify_fds() -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify"
        except OSError:
            pass
    return n


def test_a_bug_in_event_handling_asks_for_a_rescan_and_watching_goes_on(tree, monkeypatch):
    """Not a crash of the reader thread (live watching would end silently): the watches are
    walked again and every folder is rescanned. The bug is made by replacing one method."""
    root, _, events, watch = tree
    real = TreeWatch._event
    calls = []

    def buggy(self, e, out):
        calls.append(e)
        if len(calls) == 1:
            raise RuntimeError("a bug")
        return real(self, e, out)

    monkeypatch.setattr(TreeWatch, "_event", buggy)
    watch.start()
    (root / "docs" / "first.txt").write_text("1")
    events.wait_for(ev("lost", "", reason="overflow"))
    (root / "docs" / "second.txt").write_text("2")
    events.wait_for(ev("created", root / "docs" / "second.txt"))
    assert watch._thread.is_alive()
