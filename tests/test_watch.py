"""The watcher on real folders with real inotify, and the coalescing rules on their own."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from deskdex.pipeline.coalesce import Changed, Coalescer, Deleted, Moved, Rescan
from deskdex.pipeline.ignore import Rules
from deskdex.pipeline.watch import Watcher

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify tests need Linux")


class Collector:
    """A sink that remembers every record and lets a test wait for the stream to settle."""

    def __init__(self) -> None:
        self.records: list = []
        self.batches = 0
        self.cond = threading.Condition()

    def __call__(self, batch: list) -> None:
        with self.cond:
            self.records.extend(batch)
            self.batches += 1
            self.cond.notify_all()

    def settle(self, quiet: float = 0.8, timeout: float = 8.0) -> list:
        """Wait until a batch arrived and nothing more came for `quiet` seconds."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not self.records and time.monotonic() < deadline:
                self.cond.wait(deadline - time.monotonic())
            seen = -1
            while seen != self.batches and time.monotonic() < deadline:
                seen = self.batches
                self.cond.wait(quiet)
            out, self.records = self.records, []
        return out


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "w"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.txt").write_text("alpha")
    (root / "docs" / "b.txt").write_text("beta")
    return root


@pytest.fixture
def watching(tree):
    sink = Collector()
    w = Watcher(sink, debounce=0.2, max_delay=1.0).start()
    assert w.add(str(tree))
    yield tree, sink, w
    w.stop()


def p(*parts) -> str:
    return os.path.join(*map(str, parts))


@linux
def test_create_modify_delete(watching):
    root, sink, _ = watching
    f = root / "docs" / "new.txt"
    f.write_text("one")
    with open(f, "a") as fh:
        fh.write(" two")
    assert sink.settle() == [Changed(str(f), new_file=True)]
    (root / "docs" / "a.txt").write_text("changed")
    (root / "docs" / "b.txt").unlink()
    assert sorted(sink.settle(), key=repr) == [Changed(p(root, "docs", "a.txt")), Deleted(p(root, "docs", "b.txt"))]


@linux
def test_created_then_deleted_in_one_burst_is_only_looked_at(watching):
    """Nothing to convert, but the path is still named: by the time the daemon applies the batch,
    an earlier batch (or a reconcile) may have seen the file and indexed it."""
    root, sink, _ = watching
    f = root / "flash.txt"
    f.write_text("x")
    f.unlink()
    (root / "docs" / "a.txt").write_text("marker")
    assert sink.settle() == [Deleted(str(f)), Changed(p(root, "docs", "a.txt"))]


@linux
def test_rename_is_a_move_not_a_change(watching):
    root, sink, _ = watching
    os.rename(root / "docs" / "a.txt", root / "docs" / "c.txt")
    assert sink.settle() == [Moved(p(root, "docs", "a.txt"), p(root, "docs", "c.txt"))]


@linux
def test_editor_save_temp_then_rename(watching):
    root, sink, _ = watching
    final = root / "docs" / "a.txt"
    for temp in ("a.txt.tmp", ".a.txt.swp"):  # excluded temp names
        t = root / "docs" / temp
        t.write_text("saved " + temp)
        os.replace(t, final)
        assert sink.settle() == [Changed(str(final), new_file=True)], temp
    t = root / "docs" / "a.txt.new"  # an ordinary name: not a move, but looked at
    t.write_text("saved a.txt.new")
    os.replace(t, final)
    assert sink.settle() == [Deleted(str(t)), Changed(str(final), new_file=True)]


@linux
def test_editor_save_then_delete_or_rename_within_the_debounce(watching):
    """The saved file existed before the burst: it is no temp file, and what the catalog has under
    its name must go (it was left as a ghost)."""
    root, sink, _ = watching
    a, b = root / "docs" / "a.txt", root / "docs" / "b.txt"
    (root / "docs" / ".a.txt.swp").write_text("saved a")
    os.replace(root / "docs" / ".a.txt.swp", a)
    a.unlink()
    (root / "docs" / "b.txt.new").write_text("saved b")
    os.replace(root / "docs" / "b.txt.new", b)
    os.rename(b, root / "docs" / "c.txt")
    assert sorted(sink.settle(), key=repr) == sorted([
        Deleted(str(a)), Moved(str(b), p(root, "docs", "c.txt")), Deleted(p(root, "docs", "b.txt.new")),
        Changed(p(root, "docs", "c.txt"), new_file=True)], key=repr)


@linux
def test_backup_rename_then_write(watching):
    root, sink, _ = watching
    final = root / "docs" / "a.txt"
    os.rename(final, root / "docs" / "a.txt~")  # excluded backup name
    final.write_text("new")
    assert sink.settle() == [Changed(str(final), new_file=True)]


@pytest.mark.slow
@linux
def test_move_into_and_out_of_the_tree(tree, watching, tmp_path):
    root, sink, _ = watching
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "in.txt").write_text("in")
    (outside / "sub" / "deep.txt").write_text("deep")
    shutil.move(str(outside / "in.txt"), str(root / "in.txt"))
    assert sink.settle() == [Changed(p(root, "in.txt"), new_file=True)]
    shutil.move(str(outside / "sub"), str(root / "sub"))
    assert sink.settle() == [Changed(p(root, "sub", "deep.txt"), new_file=True)]
    shutil.move(str(root / "docs" / "a.txt"), str(outside / "a.txt"))
    assert sink.settle() == [Deleted(p(root, "docs", "a.txt"))]
    shutil.move(str(root / "docs"), str(outside / "docs"))
    assert sink.settle() == [Deleted(p(root, "docs"), is_dir=True)]


@linux
def test_folder_rename_is_one_move(watching):
    root, sink, _ = watching
    os.rename(root / "docs", root / "papers")
    assert sink.settle() == [Moved(p(root, "docs"), p(root, "papers"), is_dir=True)]
    # The watches followed the folder: new events name the new path.
    (root / "papers" / "a.txt").write_text("again")
    assert sink.settle() == [Changed(p(root, "papers", "a.txt"))]


@pytest.mark.slow
@linux
def test_folder_moved_out_and_back_in_keeps_its_events_paths(watching, tmp_path):
    """watchdog goes on watching a folder moved out of the tree and remembers it under its old
    path; brought back under another name, its events must name where it is now, also after its
    old parent is renamed (watchdog rebased the stale entry and sent later events to the old place)."""
    root, sink, _ = watching
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "docs" / "f").mkdir()
    (root / "docs" / "f" / "x.txt").write_text("x")
    sink.settle()
    os.rename(root / "docs" / "f", outside / "f")
    assert sink.settle() == [Deleted(p(root, "docs", "f"), is_dir=True)]
    os.rename(outside / "f", root / "g")
    assert sink.settle() == [Changed(p(root, "g", "x.txt"), new_file=True)]
    os.rename(root / "docs", root / "papers")
    assert sink.settle() == [Moved(p(root, "docs"), p(root, "papers"), is_dir=True)]
    (root / "g" / "x.txt").write_text("again")
    assert sink.settle() == [Changed(p(root, "g", "x.txt"))]


@linux
def test_folder_moved_in_then_its_parent_renamed(watching, tmp_path):
    """What a folder moved in holds was listed when watchdog handed the event over, by its path
    then: a parent renamed in between (here while a move out waits 0.5 s for its pair, holding
    back the events behind it) left the folder's files unreported."""
    root, sink, _ = watching
    outside = tmp_path / "outside"
    (outside / "m" / "sub").mkdir(parents=True)
    (outside / "m" / "f.txt").write_text("f")
    (outside / "m" / "sub" / "g.txt").write_text("g")
    os.rename(root / "docs" / "b.txt", outside / "b.txt")  # unpaired: watchdog holds it 0.5 s
    os.rename(outside / "m", root / "docs" / "m")
    time.sleep(0.2)  # both read (and the folder watched) before the rename below
    os.rename(root / "docs", root / "papers")
    got = sink.settle()
    assert Changed(p(root, "papers", "m", "f.txt"), new_file=True) in got, got
    assert Changed(p(root, "papers", "m", "sub", "g.txt"), new_file=True) in got, got


@linux
def test_folder_listed_while_its_tree_is_renamed_is_looked_at_where_it_went(watching, tmp_path, monkeypatch):
    """What a folder moved in holds is listed while the tree may go on changing: here a folder is
    listed in its parent, then the parent is renamed and the folder moved elsewhere before the
    listing gets into it. The folder was reported as made (born), its file not at all, and the
    coalescer dropped the folder's rename as that of a folder the catalog never saw: nothing
    named where the file went, and it was never indexed (seed 1402 of test_live_burst, once in
    CI). The renames happen inside the watcher's listing, so the order is certain."""
    from deskdex.pipeline import treewatch

    root, sink, _ = watching
    outside = tmp_path / "outside"
    (outside / "t" / "p" / "a" / "sub").mkdir(parents=True)
    f = outside / "t" / "p" / "a" / "sub" / "f.txt"
    f.write_text("f")
    t, listed = root / "t", str(root / "t" / "p")
    seen = []
    scandir = treewatch._scandir

    def racing(folder: str) -> list:  # the watcher's listing, overtaken by the burst
        entries = scandir(folder)
        if folder == listed:
            seen.append(folder)
            os.rename(t / "p", t / "q")
            os.rename(t / "q" / "a", root / "b")
        return entries

    monkeypatch.setattr(treewatch, "_scandir", racing)
    os.rename(root / "docs" / "b.txt", outside / "b.txt")  # unpaired: the events behind it wait for it
    os.rename(outside / "t", t)
    got = sink.settle()
    assert seen == [listed], f"the listing was not as expected, the test proves nothing: {seen}"
    final = str(root / "b" / "sub" / "f.txt")
    looked = [r.dst if isinstance(r, Moved) else r.path for r in got if not isinstance(r, Deleted)]
    assert any(final == x or final.startswith(x + os.sep) for x in looked), got


@linux
def test_folder_deleted(watching):
    root, sink, _ = watching
    shutil.rmtree(root / "docs")
    assert sink.settle() == [Deleted(p(root, "docs"), is_dir=True)]


@linux
def test_exclusions_and_deskdexignore(watching):
    root, sink, w = watching
    (root / "node_modules").mkdir()
    (root / "node_modules" / "x.js").write_text("x")
    (root / "docs" / "notes.log").write_text("log")
    (root / "docs" / "keep.txt").write_text("k")
    got = sink.settle()
    assert got == [Changed(p(root, "docs", "notes.log"), new_file=True),
                   Changed(p(root, "docs", "keep.txt"), new_file=True)]
    (root / "docs" / ".deskdexignore").write_text("*.log\n")
    assert sink.settle() == [Rescan(p(root, "docs"), "ignore_file")]
    (root / "docs" / "notes.log").write_text("more")
    (root / "docs" / "keep.txt").write_text("more")
    assert sink.settle() == [Changed(p(root, "docs", "keep.txt"))]
    assert w.rules(str(root)).excluded("docs/notes.log", False)


@linux
def test_add_and_remove_roots_at_runtime(tmp_path, watching):
    root, sink, w = watching
    other = tmp_path / "other"
    other.mkdir()
    assert w.add(str(other))
    assert w.roots == sorted([str(root), str(other)])
    (other / "o.txt").write_text("o")
    assert sink.settle() == [Changed(p(other, "o.txt"), new_file=True)]
    w.remove(str(other))
    (other / "o2.txt").write_text("o")
    (root / "docs" / "a.txt").write_text("marker")
    assert sink.settle() == [Changed(p(root, "docs", "a.txt"))]


@linux
def test_missing_root_asks_for_a_scan(tmp_path):
    sink = Collector()
    with Watcher(sink, debounce=0.1) as w:
        assert not w.add(str(tmp_path / "absent"))
        assert sink.settle(quiet=0.3) == [Rescan(str(tmp_path / "absent"), "unwatchable")]


def _thread_switches() -> int:
    total = 0
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/status") as f:
            for line in f:
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    total += int(line.split()[1])
    return total


@linux
def test_no_wakeups_while_idle(watching):
    root, sink, _ = watching
    (root / "docs" / "a.txt").write_text("one event, then silence")
    sink.settle(quiet=0.5)
    before = _thread_switches()
    time.sleep(1.5)
    # The main thread's sleep costs one or two switches; a polling loop costs dozens.
    assert _thread_switches() - before <= 4


# -- lost events, with real kernel limits


WATCH_CHILD = textwrap.dedent("""
    import json, sys, time
    from deskdex.pipeline.watch import Watcher
    def sink(batch):
        for r in batch:
            print(json.dumps([type(r).__name__, *r.__dict__.values()] if hasattr(r, "__dict__")
                             else [type(r).__name__, *[getattr(r, s) for s in r.__slots__]]), flush=True)
    w = Watcher(sink, debounce=0.2).start()
    print(json.dumps(["added", w.add(sys.argv[1])]), flush=True)
    print(json.dumps(["ready"]), flush=True)
    sys.stdin.read()  # until the test closes it
    w.stop()
""")


def _child(args: list[str], prefix: list[str] = ()) -> subprocess.Popen:
    return subprocess.Popen([*prefix, sys.executable, "-c", WATCH_CHILD, *args], stdout=subprocess.PIPE,
                            stdin=subprocess.PIPE,
                            text=True, cwd=os.path.dirname(os.path.dirname(__file__)))


def _freeze(proc: subprocess.Popen) -> None:
    """SIGSTOP the child and wait until every thread of it is stopped: kill() returns once the
    signal is sent, and a thread running on another core meanwhile can still read an inotify event
    made after the call (the order a test relies on would then not hold)."""
    os.kill(proc.pid, signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while True:
        states = []
        for tid in os.listdir(f"/proc/{proc.pid}/task"):
            try:
                with open(f"/proc/{proc.pid}/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                pass  # a thread that ended meanwhile
        if states and all(s in ("T", "t") for s in states):
            return
        assert time.monotonic() < deadline, f"the child never stopped: {states}"
        time.sleep(0.005)


def _lines_until(proc: subprocess.Popen, wanted: list) -> list:
    """The child's records up to ``wanted`` (its stdout closes, failing the test, if it never comes)."""
    timer = threading.Timer(20, proc.kill)
    timer.start()
    lines = []
    try:
        for line in proc.stdout:
            lines.append(json.loads(line))
            if lines[-1] == wanted:
                return lines
    finally:
        timer.cancel()
        timer.join()  # its thread ends at once when cancelled: no thread outlives the test
    raise AssertionError(f"no {wanted} from the child: {lines[:10]}")


@linux
def test_queue_overflow_asks_for_a_rescan(tmp_path):
    root = tmp_path / "w"
    root.mkdir()
    with open("/proc/sys/fs/inotify/max_queued_events") as f:
        limit = int(f.read())
    if limit > 200_000:
        pytest.skip(f"max_queued_events is {limit}: overflowing it would take too long")
    proc = _child([str(root)])
    try:
        _lines_until(proc, ["ready"])
        _freeze(proc)  # nobody reads the inotify queue now
        try:
            for i in range(limit // 2 + 100):  # created + modified + closed: 3 events a file
                (root / f"f{i}.txt").write_text("x")
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        _lines_until(proc, ["Rescan", str(root), "overflow"])
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
        proc.stdout.close()


@linux
def test_folder_made_then_its_parent_renamed_before_the_watcher_reads(tmp_path):
    """A folder made, filled, and its parent renamed before the watcher reads the events: the
    watch for the new folder is asked for at a path that is gone (watchdog gave up silently, and
    nothing under that folder was ever reported). Frozen with SIGSTOP, so the order is certain."""
    root = tmp_path / "w"
    (root / "a").mkdir(parents=True)
    proc = _child([str(root)])
    try:
        _lines_until(proc, ["ready"])
        _freeze(proc)
        try:
            (root / "a" / "x" / "y").mkdir(parents=True)
            (root / "a" / "x" / "f.txt").write_text("made before the rename")
            (root / "a" / "x" / "y" / "deep.txt").write_text("made before the rename")
            os.rename(root / "a", root / "b")
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        seen = _lines_until(proc, ["Moved", str(root / "a"), str(root / "b"), True])
        (root / "b" / "x" / "g.txt").write_text("made after")  # is x watched now?
        seen += _lines_until(proc, ["Changed", str(root / "b" / "x" / "g.txt"), True])
        assert ["Changed", str(root / "b" / "x" / "f.txt"), True] in seen, seen
        assert ["Changed", str(root / "b" / "x" / "y" / "deep.txt"), True] in seen, seen
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
        proc.stdout.close()


@linux
def test_watch_limit_asks_for_a_rescan(tmp_path):
    """ENOSPC for real: a user namespace whose inotify watch limit is 3 (leaves the host alone)."""
    if not shutil.which("unshare"):
        pytest.skip("unshare (util-linux) is not installed")
    probe = subprocess.run(["unshare", "-U", "-r", "sh", "-c", "echo 3 > /proc/sys/user/max_inotify_watches"],
                           capture_output=True, text=True)
    if probe.returncode:
        pytest.skip(f"cannot make a user namespace with its own inotify limit: {probe.stderr.strip()}")
    root = tmp_path / "w"
    for i in range(6):
        (root / f"d{i}").mkdir(parents=True)
    script = ["sh", "-c", 'echo 3 > /proc/sys/user/max_inotify_watches && exec "$@"', "sh"]
    proc = _child([str(root)], prefix=["unshare", "-U", "-r", *script])
    try:
        assert _lines_until(proc, ["added", True])  # the root itself is watched...
        _lines_until(proc, ["Rescan", str(root), "watch_limit"])  # ...but not every subfolder
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)
        proc.stdout.close()


# -- the coalescing rules without a filesystem


def test_coalesce_folder_move_rewrites_earlier_records():
    c = Coalescer()
    c.changed("/r/a/x.txt")
    c.deleted("/r/a/y.txt")
    c.moved("/r/a", "/r/b", is_dir=True)
    assert c.drain() == [Moved("/r/a", "/r/b", True), Deleted("/r/b/y.txt"), Changed("/r/b/x.txt")]
    assert not c


def test_coalesce_swap_through_a_temp_name_keeps_the_order():
    c = Coalescer()
    c.moved("/r/a", "/r/t")
    c.moved("/r/b", "/r/a")
    c.moved("/r/t", "/r/b")
    assert c.drain() == [Moved("/r/a", "/r/t"), Moved("/r/b", "/r/a"), Moved("/r/t", "/r/b")]


def test_coalesce_born_folder_moved_carries_files_moved_into_it():
    c = Coalescer()
    c.born_dir("/r/tmpdir")
    c.moved("/r/old.txt", "/r/tmpdir/old.txt")
    c.changed("/r/tmpdir/new.txt", created=True)
    c.moved("/r/tmpdir", "/r/final", is_dir=True)
    assert c.drain() == [Moved("/r/old.txt", "/r/final/old.txt"), Deleted("/r/tmpdir", True),
                         Changed("/r/final/new.txt", new_file=True), Changed("/r/final")]


def test_coalesce_born_folder_moved_is_looked_at_where_it_went():
    """Reported as made, with nothing below it (the listing of its parent got no further, or its
    files came in an earlier batch): renamed, it is walked at its new name."""
    c = Coalescer()
    c.born_dir("/r/t/a")
    c.moved("/r/t/a", "/r/b", is_dir=True)
    assert c.drain() == [Deleted("/r/t/a", True), Changed("/r/b")]


def test_coalesce_save_over_a_file_then_delete_it():
    c = Coalescer()
    c.changed("/r/a.txt.new", created=True)
    c.moved("/r/a.txt.new", "/r/a.txt")  # a.txt existed: the catalog has it
    c.deleted("/r/a.txt")
    assert c.drain() == [Deleted("/r/a.txt.new"), Deleted("/r/a.txt")]


def test_coalesce_save_over_a_file_then_rename_it():
    c = Coalescer()
    c.changed("/r/a.txt.new", created=True)
    c.moved("/r/a.txt.new", "/r/a.txt")
    c.moved("/r/a.txt", "/r/b.txt")
    assert c.drain() == [Moved("/r/a.txt", "/r/b.txt"), Deleted("/r/a.txt.new"), Changed("/r/b.txt", new_file=True)]


def test_coalesce_rename_chain_then_delete():
    c = Coalescer()
    c.moved("/r/a", "/r/b")
    c.moved("/r/b", "/r/c")
    c.deleted("/r/c")
    assert c.drain() == [Moved("/r/a", "/r/b"), Moved("/r/b", "/r/c"), Deleted("/r/c")]


def test_coalesce_a_born_name_renamed_onto_a_born_name_stays_born():
    c = Coalescer()
    c.changed("/r/t1", created=True)
    c.changed("/r/t2", created=True)
    c.moved("/r/t1", "/r/t2")
    c.moved("/r/t2", "/r/final")  # still never known to the catalog: no Moved
    assert c.drain() == [Deleted("/r/t1"), Deleted("/r/t2"), Changed("/r/final", new_file=True)]
    assert len(c) == 0


def test_coalesce_deleted_then_recreated_then_moved():
    c = Coalescer()
    c.deleted("/r/p")
    c.changed("/r/p", created=True)
    c.moved("/r/p", "/r/q")
    assert c.drain() == [Moved("/r/p", "/r/q"), Changed("/r/q", new_file=True)]


def test_rules_nested_ignore_files(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / ".deskdexignore").write_text("# comment\n*.log\n")
    (tmp_path / "a" / "b" / ".deskdexignore").write_text("!keep.log\nsecret/\n")
    r = Rules(str(tmp_path), ["*.bak"])
    assert r.excluded("x.log", False) and r.excluded("a/x.log", False)
    assert not r.excluded("a/b/keep.log", False) and r.excluded("a/keep.log", False)
    assert r.excluded("a/b/secret", True) and not r.excluded("a/secret", True)
    assert r.excluded("a/old.bak", False) and r.excluded("node_modules", True)
    assert not r.excluded("a/b/doc.txt", False)


@linux
def test_maildir_delivery_and_reading(watching):
    """A message written in a Maildir's tmp/ is not looked at until delivered to new/; read, it
    moves to cur/ with flags appended: one move, so it stays one document."""
    root, sink, _ = watching
    maildir = root / "Maildir"
    for sub in ("cur", "new", "tmp"):
        (maildir / sub).mkdir(parents=True)
    sink.settle(timeout=1.0)
    name = "1700000000.M123P456.host,S=40"
    (maildir / "tmp" / name).write_text("Subject: hi\nFrom: a@b\n\nbody\n")
    os.rename(maildir / "tmp" / name, maildir / "new" / name)
    assert sink.settle() == [Changed(p(maildir, "new", name), new_file=True)]
    os.rename(maildir / "new" / name, maildir / "cur" / (name + ":2,S"))
    assert sink.settle() == [Moved(p(maildir, "new", name), p(maildir, "cur", name + ":2,S"))]
