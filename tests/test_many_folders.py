"""An enterprise server watches a home per account: 10,000 watched folders must work, failures in
the last one tried again, memory growing by kilobytes a folder; and pseudo file systems (/proc,
/sys...) mounted below a watched folder are neither walked nor watched, by their type."""

from __future__ import annotations

import itertools
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from deskdex.pipeline.coalesce import Changed, Record
from deskdex.pipeline.mounts import pseudo_below, pseudo_fs
from deskdex.pipeline.scan import Excluder, walk
from deskdex.pipeline.watch import Watcher

from .conftest import CLI
from .daemon_fixture import BUSY_TIMEOUT, DaemonProcess
from .misbehaving import settings_for

FOLDERS = 10_000


def pss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Pss:"))


def threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))


def failure(d: DaemonProcess, path: Path, attempts: int, what: str) -> dict:
    """The failure of ``path`` once it has failed ``attempts`` times."""
    def failed(st: dict) -> bool:
        return any(f["path"] == str(path) and f["attempts"] >= attempts for f in st.get("failures", []))

    d.wait_for(lambda _: failed(d.call("status", failures=True)), what=what)
    st = d.call("status", failures=True)
    return next(f for f in st["failures"] if f["path"] == str(path))


def test_retries_under_any_number_of_folders(tmp_path: Path):
    """The catalog's questions about failures under the watched folders, asked with 10,000 of them
    (the daemon asks with all its folders at every pass): one term per folder was refused."""
    from deskdex.index.store import Catalog, Row
    from deskdex.paths import path_to_uri

    folders = [f"/srv/homes/u{i:05d}" for i in range(FOLDERS)]
    catalog = Catalog(str(tmp_path / "catalog.sqlite"))
    try:
        for path, at in ((folders[-1] + "/held.txt", 100.0), ("/srv/homes/u099990/other.txt", 50.0),
                         ("/elsewhere/x.txt", 10.0)):
            catalog.put(Row(path_to_uri(path), path=path, status="failed", reason="timeout", attempts=1, retry_at=at))
        catalog.commit()
        assert [r[1:] for r in catalog.retries.scheduled(folders)] == [(folders[-1] + "/held.txt", 100.0)]
        assert catalog.retries.scheduled(folders[:-1]) == []  # u09999 only: not u099990
        assert catalog.retries.retry_now(folders + ["/nowhere/"], 5.0) == 1
        assert sorted(r[1:] for r in catalog.retries.scheduled(None)) == [
            ("/elsewhere/x.txt", 10.0), (folders[-1] + "/held.txt", 5.0), ("/srv/homes/u099990/other.txt", 50.0)]
        assert catalog.retries.retry_now([folders[-1] + "/held.txt"], 7.0) == 1  # a file named by itself
        assert catalog.retries.retry_now(["/srv/homes/"], 8.0) == 2  # a trailing slash
        assert catalog.retries.retry_now([], 9.0) == 0
    finally:
        catalog.close()


@pytest.mark.slow
@pytest.mark.timeout(BUSY_TIMEOUT)
def test_ten_thousand_watched_folders(tmp_path: Path, cli: CLI):
    """Retries under 10,000 folders (SQLite refused a condition with a term per folder: "Expression
    tree is too large", from about 500), a live change in the last folder, and the daemon's
    memory and threads: watchdog gave each folder a thread and each a re2 matcher, 70 KB a folder."""
    homes = tmp_path / "homes"
    folders = [homes / f"u{i:05d}" for i in range(FOLDERS)]
    for f in folders:
        f.mkdir(parents=True)
    last = folders[-1]
    (last / "held.txt").write_text("the held file says qheldx\n")
    (last / "plain.txt").write_text("the plain file says qplainx\n")
    control = tmp_path / "control"
    config, env = settings_for(control)
    (control / "hold").touch()

    # The same daemon with one folder and a file: the memory every daemon has.
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "plain.txt").write_text("the plain file says qplainx\n")
    one = DaemonProcess(tmp_path / "one", [alone], extra_config=config, env=env)
    one.start()
    try:
        one.eventually("qplainx", [str(alone / "plain.txt")])
        base_pss = pss_kib(one.proc.pid)
    finally:
        one.stop()

    # No retry by itself within the test (retry_first): `deskdex retry` tries it again.
    d = DaemonProcess(cli.home, folders, extra_config="retry_first = 3600.0\n" + config, env=env, time_limit=3.0)
    d.start(wait=False)
    try:
        f = failure(d, last / "held.txt", 1, "the held file in the last folder to time out")
        assert f["reason"] == "timeout" and f["retry_at"] is not None, f
        d.wait_for(lambda st: st["state"] == "idle", what="the first reconcile")
        d.eventually("qplainx", [str(last / "plain.txt")])
        st = d.call("status")
        assert st["retries"] == 1 and st["next_retry"] == f["retry_at"], st
        assert not any("failed files" in n for n in st.get("notes", [])), st  # "could not look for / schedule"
        out = cli.run("retry").stdout
        assert "tries 1 failed file" in out, out
        g = failure(d, last / "held.txt", 2, "the second try, asked for")
        assert g["retry_at"] > time.time() + 3000, g  # scheduled again, after its back-off

        # A live change in the last folder is picked up.
        (last / "live.txt").write_text("a live change zlivechangeq\n")
        d.eventually("zlivechangeq", [str(last / "live.txt")])

        # A few threads for every folder, not one each; kilobytes a folder, not tens (measured:
        # about 2 KB; 70 KB before). Generous: other parts of the daemon vary by megabytes.
        assert threads(d.proc.pid) < 100, threads(d.proc.pid)
        grown = (pss_kib(d.proc.pid) - base_pss) / FOLDERS
        assert grown < 20, f"{grown:.1f} KiB a folder"
    finally:
        d.stop()


# -- pseudo file systems --------------------------------------------------------------------------

@pytest.fixture
def mounts() -> Iterator[Callable[[str, Path], None]]:
    """``mount(kind, folder)``: mount a file system of that kind (as root), unmounted afterwards."""
    done: list[Path] = []

    def mount(kind: str, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(["mount", "-t", kind, kind, str(folder)], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount {kind} here: {r.stderr.strip() or r.returncode}")
        done.append(folder)

    try:
        yield mount
    finally:
        for folder in reversed(done):
            subprocess.run(["umount", "-l", str(folder)], check=False)


def inotify_watches() -> int:
    """The inotify watches this process holds, all its inotify descriptors summed (/proc fdinfo)."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != "anon_inode:inotify":
                continue
            with open(f"/proc/self/fdinfo/{fd}") as f:
                n += sum(line.startswith("inotify wd:") for line in f)
        except OSError:
            continue
    return n


def test_pseudo_file_systems_below_a_watched_folder_are_not_walked_nor_watched(tmp_path: Path, mounts):
    if os.geteuid() != 0:
        pytest.skip("mounting needs root")
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.txt").write_text("a")
    (docs / "sub" / "b.txt").write_text("b")
    # Read before the mounts: the table is read again once the kernel says it changed.
    assert pseudo_fs(str(docs / "sub" / "proc")) is None
    mounts("proc", docs / "sub" / "proc")
    mounts("sysfs", docs / "sub" / "sys")
    mounts("tmpfs", docs / "sub" / "shm")  # real files: walked
    (docs / "sub" / "shm" / "c.txt").write_text("c")
    assert pseudo_fs(str(docs / "sub" / "proc")) == "proc" and pseudo_fs(str(docs / "sub" / "sys")) == "sysfs"
    assert pseudo_fs(str(docs / "sub" / "shm")) is None and pseudo_fs(str(docs)) is None

    # Bounded: a walk that enters /sys would take minutes.
    found = [f.path for f in itertools.islice(walk(str(docs), Excluder()), 10_000)]
    assert sorted(found) == sorted(str(p) for p in (docs / "a.txt", docs / "sub" / "b.txt",
                                                   docs / "sub" / "shm" / "c.txt")), found[:20]
    # Named as a folder itself, a pseudo file system is walked.
    proc = str(docs / "sub" / "proc")
    named = [f.path for f in itertools.islice(walk(proc, Excluder()), 50)]
    assert named and all(p.startswith(proc + os.sep) for p in named), named

    # Watched: the folders and the tmpfs have a watch each, not /proc's and /sys's thousands.
    got: list[Record] = []
    seen = threading.Event()

    def sink(records: list[Record]) -> None:
        got.extend(records)
        seen.set()

    before = inotify_watches()
    with Watcher(sink, debounce=0.1) as w:
        assert w.add(str(docs))
        watches = inotify_watches() - before
        assert watches == 3, f"{watches} inotify watches for docs, docs/sub and docs/sub/shm"
        (docs / "sub" / "d.txt").write_text("d")
        assert seen.wait(60), "no event from the watched folder"
    assert Changed(str(docs / "sub" / "d.txt"), new_file=True) in got, got
    subprocess.run(["umount", str(docs / "sub" / "proc")], check=True)
    assert pseudo_fs(str(docs / "sub" / "proc")) is None  # and again after an unmount


def test_watching_the_root_leaves_proc_and_sys_alone():
    """`deskdex index /`, `watch add /`: the scanner's decision, as it makes it for a walk of /."""
    below = pseudo_below("/")
    if not below:
        pytest.skip("no /proc/self/mountinfo here")
    assert pseudo_fs("/proc") == "proc" and "/proc" in below
    assert pseudo_fs("/sys") == "sysfs" and "/sys" in below
    assert pseudo_fs("/") is None and pseudo_fs("/tmp") is None
    # Other tests of this file, on another worker, mount proc and sysfs in their pytest folders
    # (/tmp/pytest-of-USER/...) for a moment: those are pseudo file systems, rightly listed.
    ordinary = [p for p in below if p == "/tmp" or p.startswith(("/tmp/", "/home/", "/root/"))
                and "/pytest-of-" not in p]
    assert not ordinary, below


def test_rescans_of_many_folders_are_one_pass_over_the_same_folders():
    """What lost events ask for (a rescan of every watched folder) is reconciled in one pass, over
    the folders the daemon reconciled one rescan at a time: those a path is in, those below it,
    else the path itself."""
    import random

    from deskdex.daemon.loop import rescan_roots
    from deskdex.paths import at_or_under

    def one_at_a_time(rescans: list[str], roots: list[str]) -> list[str]:  # the daemon's earlier way
        out: set[str] = set()
        for path in rescans:
            out.update([p for p in roots if at_or_under(path, p) or at_or_under(p, path)] or [path])
        return sorted(out)

    rnd = random.Random(28)
    roots = ["/srv/homes", "/srv/homes/u1", "/srv/homes/u1/shared", "/srv/homes/u10", "/data/", "/data-x", "/"]
    names = ["/", "/srv", "/srv/homes", "/srv/homes/u1", "/srv/homes/u10", "/srv/homes/u1/shared/a", "/data",
             "/data/sub/f.txt", "/data-x/y", "/data-xy", "/elsewhere/z", "/srv/homes/u100"]
    for _ in range(300):
        some = rnd.sample(roots, rnd.randint(0, len(roots)))
        asked = rnd.sample(names, rnd.randint(1, 4))
        assert rescan_roots(asked, some) == one_at_a_time(asked, some), (asked, some)
    homes = [f"/srv/homes/u{i:05d}" for i in range(FOLDERS)]
    assert rescan_roots(homes, homes) == homes  # an overflow: every home, once (10^8 comparisons before)
    assert rescan_roots(["/srv/homes/u09999/Documents"], homes) == ["/srv/homes/u09999"]


def test_whose_rights_read_a_file_among_ten_thousand_homes():
    """Enterprise mode reads each file with the rights of the account whose home holds it (the
    innermost when homes nest), else nobody's: the same answers as the look at every home it was,
    at the cost of the path's depth. (Accounts as data: no 10,000 Unix accounts are made.)"""
    from deskdex.converters.privilege import NOBODY
    from deskdex.daemon.accounts import Account, AccountWatcher

    def account(uid: int, home: str) -> Account:
        return Account(f"u{uid}", uid, uid, home, frozenset({uid}))

    def every_home(accounts: list[Account], path: str):  # the earlier way, the reference
        by_home = sorted(((os.path.abspath(a.home).rstrip(os.sep) + os.sep, a.run_as) for a in accounts),
                         key=lambda t: -len(t[0]))
        return next((who for home, who in by_home if path.startswith(home)), NOBODY)

    watcher = AccountWatcher.__new__(AccountWatcher)  # its accounts only: no /etc files read, nothing watched
    nested = [account(1000, "/home/a"), account(1001, "/home/a/b"), account(1002, "/home/ab"),
              account(1003, "/home/c/"), account(1004, "/home/c"), account(1005, "/srv")]
    watcher.accounts = nested
    reader = watcher.reader_of()
    for path in ("/home/a/f.txt", "/home/a/b/f.txt", "/home/a/bc/f.txt", "/home/ab/f.txt", "/home/abc/f.txt",
                 "/home/c/f.txt", "/home/a", "/srv/x/y/z.txt", "/tmp/f.txt"):
        assert reader(path) == every_home(nested, path), path
    watcher.accounts = [account(2000 + i, f"/home/u{i:05d}") for i in range(FOLDERS)]
    reader = watcher.reader_of()
    assert reader("/home/u09999/Documents/a.txt").uid == 2000 + FOLDERS - 1
    assert reader("/home/u099990/a.txt") == NOBODY
