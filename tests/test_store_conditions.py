"""The daemon against an index it cannot write, for real: its data on a small tmpfs filled to the
brim, then made read-only, and its catalog locked by another program. Each time it must say
``stalled`` and why, keep answering searches from what it indexed before, and catch up once the
condition clears, losing nothing: the catalog, the search index and the files on disk agree.

The tmpfs cases need root (mount); they skip without it, or where mounting fails (a container
without the capability)."""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from deskdex.errors import DiskFull, StoreError, StoreReadOnly
from deskdex.index.storeerrors import LOW_SPACE, from_tantivy

from .daemon_fixture import DaemonProcess

pytestmark = pytest.mark.slow  # daemons on full and read-only file systems

WORD = "ledger"  # in every file: a search for it lists the whole index


def write_doc(path: Path, words: str) -> Path:
    """A file of a few KB, every word but WORD its own (alike files would be collapsed into one
    hit as near-duplicates)."""
    path.write_text(f"{WORD} {words} " + " ".join(f"{path.stem}x{n}" for n in range(300)) + "\n")
    return path


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    """The watched folder, on the normal disk: only the daemon's data is on the small file system."""
    d = tmp_path / "docs"
    d.mkdir()
    for name, words in (("apples.txt", "apples and pears"), ("plan.txt", "the zeppelin plan"),
                        ("keep.txt", "a receipt to keep")):
        write_doc(d / name, words)
    return d


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


@pytest.fixture
def data_fs(tmp_path: Path) -> Iterator[Path]:
    """An 8 MB tmpfs mounted where the daemon keeps its data (HOME/data)."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root on Linux")
    data = tmp_path / "home" / "data"
    data.mkdir(parents=True)
    p = _run("mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(data))
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip()}")
    yield data
    if _run("umount", str(data)).returncode != 0:
        _run("umount", "-l", str(data))  # something still holds it: detach it anyway


def _daemon(tmp_path: Path, docs: Path) -> Iterator[DaemonProcess]:
    d = DaemonProcess(tmp_path / "home", [docs], extra_config="workers = 1\n").start()
    yield d
    d.stop()


@pytest.fixture
def daemon_on_tmpfs(tmp_path: Path, docs: Path, data_fs: Path) -> Iterator[DaemonProcess]:
    yield from _daemon(tmp_path, docs)  # stopped before data_fs is unmounted


@pytest.fixture
def daemon(tmp_path: Path, docs: Path) -> Iterator[DaemonProcess]:
    yield from _daemon(tmp_path, docs)


def fill(path: Path) -> None:
    """Write to ``path`` until the file system has no byte left (appending to what is there)."""
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600)
    try:
        for chunk in (b"\0" * 65536, b"\0" * 4096, b"\0"):
            while True:
                try:
                    os.write(fd, chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)


def new_files(docs: Path, n: int = 5) -> list[str]:
    return [str(write_doc(docs / f"new{i}.txt", f"brimful item{i}")) for i in range(n)]


def stalled(daemon: DaemonProcess, reason: str, keep_up: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """The status once the daemon says it is stalled, ``reason`` in its state reason, and has
    tried again in vain (``keep_up`` keeps the condition up meanwhile)."""
    def check(st: dict[str, Any]) -> bool:
        keep_up()
        return bool(st["state"] == "stalled")

    st = daemon.wait_for(check, quiet=30, what="the daemon to stall")
    assert reason in (st["state_reason"] or ""), st["state_reason"]
    deadline = time.monotonic() + 15
    while "still stalled" not in daemon.log.read_text():
        assert time.monotonic() < deadline, f"no second try:\n{daemon.log.read_text()[-3000:]}"
        keep_up()
        time.sleep(0.1)
    return st


def assert_in_line(daemon: DaemonProcess, docs: Path, data: Path) -> None:
    """Every file on disk is found, nothing else is, and the catalog says the same."""
    on_disk = sorted(str(p) for p in docs.glob("*.txt"))
    daemon.eventually(WORD, on_disk, quiet=90)
    st = daemon.wait_for(lambda st: st["state"] == "idle" and st["queue"] == 0, what="idle after catching up")
    assert st["state_reason"] is None
    assert st["documents"] == len(on_disk)
    db = sqlite3.connect(f"file:{data / 'catalog.sqlite'}?mode=ro", uri=True)
    try:
        paths = sorted(p for (p,) in db.execute("SELECT path FROM docs WHERE parent IS NULL AND status='ok'"))
        pending = db.execute("SELECT count(*) FROM pending").fetchone()[0]
    finally:
        db.close()
    assert paths == on_disk
    assert pending == 0, "tantivy is not in line with the catalog"


def test_disk_full_then_freed(daemon_on_tmpfs: DaemonProcess, docs: Path, data_fs: Path) -> None:
    daemon = daemon_on_tmpfs
    daemon.eventually("apples", [str(docs / "apples.txt")])
    filler = data_fs / "filler"
    fill(filler)
    started = time.monotonic()
    added = new_files(docs)
    # Whatever the daemon frees (a temporary file) is taken again, until it gives up.
    st = stalled(daemon, "no space left", keep_up=lambda: fill(filler))
    assert st["state_reason"].startswith("no space left on the device holding")

    # Stalled, it still answers from what was indexed before, and takes more changes in.
    assert daemon.search("apples") == [str(docs / "apples.txt")]
    assert set(daemon.search("brimful")) <= set(added)
    (docs / "plan.txt").unlink()
    os.rename(docs / "keep.txt", docs / "kept.txt")
    added.append(str(write_doc(docs / "late.txt", "brimful late")))

    filler.unlink()
    daemon.eventually("brimful", added, quiet=90)
    assert_in_line(daemon, docs, data_fs)
    print(f"full disk: stalled and caught up in {time.monotonic() - started:.1f} s")


def test_start_on_full_disk(tmp_path: Path, docs: Path, data_fs: Path) -> None:
    """Started on a full disk, the daemon comes up stalled rather than failing, and catches up."""
    DaemonProcess(tmp_path / "home", [docs]).start().stop()
    added = new_files(docs, 2)
    filler = data_fs / "filler"
    fill(filler)
    daemon = DaemonProcess(tmp_path / "home", [docs]).start(wait=False)
    try:
        stalled(daemon, "no space left", keep_up=lambda: fill(filler))
        assert daemon.search("apples") == [str(docs / "apples.txt")]
        filler.unlink()
        daemon.eventually("brimful", added, quiet=90)
        assert_in_line(daemon, docs, data_fs)
    finally:
        daemon.stop()


def test_read_only_then_writable(daemon_on_tmpfs: DaemonProcess, docs: Path, data_fs: Path) -> None:
    daemon = daemon_on_tmpfs
    daemon.eventually("apples", [str(docs / "apples.txt")])
    # A remount of the tmpfs itself is refused while the daemon has files open for writing
    # (EBUSY); a read-only view of it mounted over the data folder makes every file opened from
    # now on read-only, as a file system the kernel turned read-only does.
    p = _run("mount", "--bind", "-o", "ro", str(data_fs), str(data_fs))
    if p.returncode != 0:
        pytest.skip(f"cannot mount a read-only view: {p.stderr.strip()}")
    try:
        added = new_files(docs)
        stalled(daemon, "read-only")
        assert daemon.search("apples") == [str(docs / "apples.txt")]
    finally:
        _run("umount", "-l", str(data_fs))  # the writable tmpfs below shows again
    daemon.eventually("brimful", added, quiet=90)
    assert_in_line(daemon, docs, data_fs)


def test_catalog_locked_then_released(daemon: DaemonProcess, docs: Path, tmp_path: Path) -> None:
    data = tmp_path / "home" / "data"
    daemon.eventually("apples", [str(docs / "apples.txt")])
    holder = sqlite3.connect(data / "catalog.sqlite", isolation_level=None, timeout=10)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        added = new_files(docs, 2)
        stalled(daemon, "lock")
        assert daemon.search("apples") == [str(docs / "apples.txt")]
        holder.execute("ROLLBACK")
    finally:
        holder.close()
    daemon.eventually("brimful", added, quiet=90)
    assert_in_line(daemon, docs, data)


def test_stop_while_stalled(daemon: DaemonProcess, docs: Path, tmp_path: Path) -> None:
    """SIGTERM ends a stalled daemon within seconds; what it could not index, the next start does."""
    data = tmp_path / "home" / "data"
    holder = sqlite3.connect(data / "catalog.sqlite", isolation_level=None, timeout=10)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        added = new_files(docs, 2)
        stalled(daemon, "lock")
        started = time.monotonic()
        assert daemon.stop() == 0
        took = time.monotonic() - started
        holder.execute("ROLLBACK")
    finally:
        holder.close()
    assert took < 5, f"stopping a stalled daemon took {took:.1f} s"
    again = DaemonProcess(tmp_path / "home", [docs]).start()
    try:
        again.eventually("brimful", added)
        assert_in_line(again, docs, data)
    finally:
        again.stop()


@pytest.mark.parametrize("message, kind", [
    ("An IO error occurred: 'No space left on device (os error 28) at path \"/d/.tmpcjFlG4\"'", DiskFull),
    ("Failed to open file for write: 'IoError { io_error: Custom { kind: StorageFull, error: PathError { "
     "path: \"/d/.tmpm\", err: Os { code: 28, kind: StorageFull, message: \"No space left on device\" } } } }'",
     DiskFull),
    ("Failed to acquire Lockfile: IoError(Os { code: 30, kind: ReadOnlyFilesystem, message: "
     "\"Read-only file system\" }). None", StoreReadOnly),
])
def test_tantivy_messages_name_the_condition(message: str, kind: type[StoreError], tmp_path: Path) -> None:
    """tantivy says why only in its message text (as tantivy-py 0.2x words it)."""
    error = from_tantivy(ValueError(message), str(tmp_path))
    assert type(error) is kind and str(tmp_path) in str(error)


def test_tantivy_failure_without_a_cause_asks_the_file_system(tmp_path: Path) -> None:
    """A killed writer names no cause: on a file system with room that is no condition to wait out."""
    st = os.statvfs(tmp_path)
    if st.f_bavail * st.f_frsize < 2 * LOW_SPACE or st.f_flag & os.ST_RDONLY:
        pytest.skip("the temporary folder's disk is (nearly) full or read-only")
    killed = ValueError("An error occurred in a thread: 'An index writer was killed.. A worker thread "
                        "encountered an error (io::Error most likely) or panicked.'")
    assert type(from_tantivy(killed, str(tmp_path))) is StoreError
