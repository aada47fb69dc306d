"""Hostile file systems: names that are not UTF-8 (in files, folders and archives), names with a
newline, 255-byte names, FIFOs, sockets, devices, a file swapped for a FIFO between the scan and
the read, a 64 GB sparse file. For each, through `deskdex index` and through the daemon: the
other files are indexed, nothing hangs or exits, and `status --failures` gives the reason.

Everything is generated here, on the test's own file system (names are bytes: os.fsencode)."""

from __future__ import annotations

import io
import json
import os
import socket
import stat
import string
import subprocess
import tarfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from deskdex.converters import Limits, Source, convert, uri_to_path
from deskdex.paths import path_to_uri
from deskdex.errors import Interrupted, NotRegular
from deskdex.index import Collection
from deskdex.index.checksums import raw_checksum
from deskdex.pipeline.indexer import Indexer

from .conftest import CLI, DESKDEX
from .daemon_fixture import BUSY_TIMEOUT, DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUSY_TIMEOUT)]

BAD = b"bad\xff\xfe name.txt"  # not UTF-8: what old archives and USB sticks hold
BAD_DIR = b"folder \xe9t\xe9"  # Latin-1 "été"
NEWLINE = "two\nlines.txt"
LONG = "l" * 251 + ".txt"  # 255 bytes, the most a name may have
SPARSE = 64 * 2**30


def write(folder: bytes, name: bytes, text: str) -> str:
    path = os.path.join(folder, name)
    with open(path, "wb") as f:
        f.write(text.encode())
    return os.fsdecode(path)


def hostile_tree(root: Path) -> dict[str, Any]:
    """A folder of hostile names and file types beside ordinary files; returns what to expect."""
    r = os.fsencode(root)
    os.makedirs(os.path.join(r, BAD_DIR))
    good = {
        "ordinary": write(r, b"ordinary.txt", "kumquat ordinary neighbour"),
        "bad": write(r, BAD, "kumquat in a name that is not utf8"),
        "bad_dir": write(os.path.join(r, BAD_DIR), b"inner.txt", "kumquat inside a latin1 folder"),
        "newline": write(r, os.fsencode(NEWLINE), "kumquat after a newline name"),
        "long": write(r, os.fsencode(LONG), "kumquat with the longest name"),
    }
    data = b"kumquat member of a tar with a latin1 name\n"
    with tarfile.open(os.path.join(r, b"archive.tar"), "w", format=tarfile.GNU_FORMAT) as t:
        info = tarfile.TarInfo(os.fsdecode(b"m\xe9mo.txt"))
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    os.mkfifo(os.path.join(r, b"fifo.txt"))
    os.mkfifo(os.path.join(r, b"fifo \xff.txt"))
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(os.path.join(os.fsdecode(r), "socket.txt"))
    sock.close()  # the socket file stays
    os.symlink("/dev/zero", os.path.join(r, b"zero.txt"))  # symlinks are never followed in a folder
    with open(os.path.join(r, b"sparse.txt"), "wb") as f:
        f.truncate(SPARSE)
    special = {"fifo.txt": "not_regular", "fifo \ufffd.txt": "not_regular", "socket.txt": "not_regular",
               "sparse.txt": "too_large"}
    if os.geteuid() == 0:  # only root may make a device node
        os.mknod(os.path.join(r, b"null.txt"), 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        special["null.txt"] = "not_regular"
    return {"good": good, "special": special}


def hits(results: dict[str, Any]) -> dict[str, str]:
    """Search hits as {exact path on disk: displayed path}."""
    return {uri_to_path(h["uri"].split("#")[0]) or "": h["path"] for h in results["hits"]}


def check_indexed(results: dict[str, Any], tree: dict[str, Any]) -> None:
    found = hits(results)
    for path in tree["good"].values():
        assert path in found, f"{path!r} not found among {sorted(found)}"
    bad = tree["good"]["bad"]
    assert found[bad].endswith("bad\ufffd\ufffd name.txt"), found[bad]
    # The URI percent-encodes the exact bytes, and names the same file again.
    uri = path_to_uri(bad)
    assert "%FF%FE" in uri and uri_to_path(uri) == bad and os.path.exists(uri_to_path(uri) or "")
    members = [h for h in results["hits"] if "#" in h["uri"]]
    assert members, "the archive member with a Latin-1 name is not indexed"


def check_reasons(failures: list[dict[str, Any]], tree: dict[str, Any]) -> None:
    got = {os.path.basename(f["path"]): f["reason"] for f in failures}
    for name, reason in tree["special"].items():
        assert got.get(name) == reason, f"{name}: expected {reason}, got {got.get(name)} in {got}"
    assert "zero.txt" not in got, "a symlink in a folder is never followed, so never read"


def test_index_with_hostile_names_indexes_the_rest(cli: CLI, tmp_path: Path) -> None:
    tree = hostile_tree(tmp_path / "docs")
    started = time.monotonic()
    p = cli.run("index", str(tmp_path / "docs"), "--json", timeout=120)
    took = time.monotonic() - started
    assert "Traceback" not in p.stderr, p.stderr
    summary = json.loads(p.stdout)
    assert summary["indexed"] >= 6, summary
    assert took < 60, f"the 64 GB sparse file must not be read: index took {took:.0f} s"
    check_indexed(cli.json("search", "kumquat", "--limit", "50"), tree)
    check_reasons(cli.json("status", "--failures")["failures"], tree)
    # `show` reaches the file by its exact name and by its URI.
    bad = tree["good"]["bad"]
    assert "not utf8" in cli.run("show", path_to_uri(bad)).stdout
    shown = subprocess.run([os.fsencode(DESKDEX), b"show", os.fsencode(bad)], capture_output=True,
                           env=dict(os.environ, DESKDEX_HOME=str(cli.home)), timeout=120)
    assert shown.returncode == 0 and b"not utf8" in shown.stdout, shown.stderr


@pytest.mark.parametrize("kind", ["fifo", "devzero_link", "socket"])
def test_index_of_a_special_file_given_by_name_returns_with_a_reason(cli: CLI, tmp_path: Path, kind: str) -> None:
    target = tmp_path / f"{kind}.txt"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "devzero_link":
        target.symlink_to("/dev/zero")
    else:
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(target))
        s.close()
    (tmp_path / "fine.txt").write_text("persimmon beside a special file")
    summary = json.loads(cli.run("index", str(target), str(tmp_path / "fine.txt"), "--json", timeout=60).stdout)
    assert summary["failed_by_reason"] == {"not_regular": 1}, summary
    assert summary["indexed"] == 1
    assert [h["path"] for h in cli.json("search", "persimmon")["hits"]] == [str(tmp_path / "fine.txt")]


def test_a_file_swapped_for_a_fifo_after_the_scan_is_never_opened_blocking(tmp_path: Path) -> None:
    """The scan saw a regular file; by the time it is read it is a FIFO (a hook makes the swap
    happen at exactly that moment). Nothing may block: the FIFO has no writer."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3):
        (docs / f"n{i}.txt").write_text(f"nectarine number {i}")
    victim = docs / "n1.txt"

    def swap(path: str) -> None:
        if path == str(victim):
            victim.unlink()
            os.mkfifo(victim)

    with Collection.open(str(tmp_path / "data"), writable=True) as coll:
        indexer = Indexer(coll, Limits(), workers=1)
        indexer.before_read = swap
        files = indexer.scan([str(docs)])
        done: list[Any] = []
        t = threading.Thread(target=lambda: done.append(indexer.sync([str(docs)], files)), daemon=True)
        t.start()
        t.join(60)
        assert not t.is_alive(), "reading a file swapped for a FIFO blocked the indexer"
        summary = done[0]
        assert summary.indexed == 2 and dict(summary.failed) == {"not_regular": 1}, summary
        failed = coll.get(path_to_uri(str(victim)))
        assert failed is not None and failed.reason == "not_regular"


def test_a_converter_given_a_fifo_fails_the_file_without_blocking(tmp_path: Path) -> None:
    """The same swap after the checksum, before a worker reads: every open is non-blocking and
    checked on the descriptor."""
    fifo = tmp_path / "late.txt"
    os.mkfifo(fifo)
    started = time.monotonic()
    outcomes = convert(Source.from_path(fifo))
    assert time.monotonic() - started < 10
    assert [o.reason for o in outcomes] == ["not_regular"]
    with pytest.raises(NotRegular):
        raw_checksum(str(fifo))


def test_a_stop_interrupts_the_checksum_of_a_huge_file(tmp_path: Path) -> None:
    huge = tmp_path / "huge.bin"
    with open(huge, "wb") as f:
        f.truncate(SPARSE)
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    started = time.monotonic()
    with pytest.raises(Interrupted):
        raw_checksum(str(huge), stop=stop)
    assert time.monotonic() - started < 5, "a stop must end the reading at once"


@pytest.fixture
def daemon_on_hostile_tree(tmp_path: Path) -> Iterator[tuple[DaemonProcess, dict[str, Any], Path]]:
    docs = tmp_path / "docs"
    tree = hostile_tree(docs)
    d = DaemonProcess(tmp_path / "home", [docs]).start()
    try:
        yield d, tree, docs
    finally:
        d.stop()


def test_daemon_starts_and_stays_up_with_hostile_names(daemon_on_hostile_tree: tuple[DaemonProcess, dict[str, Any], Path]) -> None:
    d, tree, docs = daemon_on_hostile_tree
    check_indexed(d.call("search", query="kumquat", limit=50), tree)
    cli = CLI(d.home)
    check_reasons(cli.json("status", "--failures")["failures"], tree)
    # Created while it runs: a name that is not UTF-8, a FIFO, a socket, a newline in a name.
    r = os.fsencode(docs)
    live = write(r, b"live \xfa\xfb.txt", "quince created live with a bad name")
    write(r, b"live\nnewline.txt", "quince created live with a newline")
    os.mkfifo(os.path.join(r, b"live fifo \xff.txt"))
    d.wait_for(lambda st: st["state"] == "idle" and st["failed"] >= len(tree["special"]) + 1, what="the live FIFO")
    found = d.call("search", query="quince", limit=10)
    assert live in hits(found) and len(found["hits"]) == 2, found
    # Renamed and deleted live, by their exact names.
    moved = os.path.join(r, b"moved \xfc.txt")
    os.rename(os.fsencode(live), moved)
    os.rename(os.path.join(r, BAD_DIR), os.path.join(r, b"renamed \xe8"))
    os.unlink(os.path.join(r, b"live\nnewline.txt"))
    expected = {os.fsdecode(moved), os.fsdecode(os.path.join(r, b"renamed \xe8", b"inner.txt")),
                str(docs / "archive.tar")}
    seen: list[set[str]] = []

    def renamed(st: dict[str, Any]) -> bool:
        seen.append(set(hits(d.call("search", query="quince OR latin1"))))
        return st["state"] == "idle" and seen[-1] == expected

    try:
        d.wait_for(renamed, what="the live renames")
    except AssertionError as exc:
        raise AssertionError(f"expected {expected}, found {seen[-1]}") from exc
    assert d.proc is not None and d.proc.poll() is None, "the daemon exited"


def test_sigterm_during_the_checksum_of_a_huge_file_stops_the_daemon_at_once(tmp_path: Path) -> None:
    """With the size limit raised above a 64 GB sparse file, its checksum reads 64 GB of zeros;
    SIGTERM must end that within seconds (the docs promise about a second), not after the file."""
    docs = tmp_path / "docs"
    docs.mkdir()
    with open(docs / "huge.txt", "wb") as f:
        f.truncate(SPARSE)
    d = DaemonProcess(tmp_path / "home", [docs], extra_config="max_file_mb = 1000000\n").start(wait=False)
    try:
        d.wait_for(lambda st: st["state"] == "indexing", what="the reconcile to start reading")
        time.sleep(1.0)  # well into the 64 GB
        assert d.proc is not None
        started = time.monotonic()
        code = d.stop()
        took = time.monotonic() - started
    finally:
        d.stop()
    assert code == 0 and took < 10, f"SIGTERM took {took:.1f} s (exit {code})"


def test_a_folder_name_that_is_not_utf8_cannot_be_kept_in_the_config_and_says_why(cli: CLI, tmp_path: Path) -> None:
    folder = os.path.join(os.fsencode(tmp_path), BAD_DIR)
    os.mkdir(folder)
    p = subprocess.run([os.fsencode(DESKDEX), b"watch", b"add", folder], capture_output=True, text=True,
                       env=dict(os.environ, DESKDEX_HOME=str(cli.home)), timeout=120)
    assert p.returncode != 0 and "not valid UTF-8" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert cli.run("watch", "list").stdout.strip() != "", "the config file is still readable"


def test_exclude_patterns_match_names_that_are_not_utf8(tmp_path):
    """Patterns are matched by re2, which takes only UTF-8: a name whose bytes are not (kept as
    surrogates) must be matched all the same, by the same rules, never raise."""
    from deskdex.pipeline.ignore import Rules
    from deskdex.pipeline.scan import Excluder

    ex = Excluder(["private-*/"])
    assert ex.excluded("caf\udce9.tmp", False) and ex.excluded("notes/.caf\udce9", False)
    assert not ex.excluded("caf\udce9.txt", False) and not ex.excluded("caf\udce9", True)
    assert ex.excluded("private-caf\udce9", True) and ex.excluded("node_modules", True)
    (tmp_path / ".deskdexignore").write_text("*.draft\n!keep*.draft\n")
    rules = Rules(str(tmp_path))
    assert rules.excluded("caf\udce9.draft", False) and not rules.excluded("keep-caf\udce9.draft", False)
    assert not rules.excluded("caf\udce9.md", False)


def test_a_uri_is_the_percent_encoding_of_the_exact_bytes_of_any_name() -> None:
    """path_to_uri takes a path of unreserved ASCII as its own URI path (a quarter of quote()'s time,
    issue 33): every other name, non-UTF-8 bytes (surrogates) included, is quote()'s, and the two
    ways agree on every name."""
    import random
    from urllib.parse import quote

    rnd = random.Random(33)
    alphabet = string.printable + "é日\udcff\udc80"
    names = ["/plain/notes-1.txt", "/a b/c", "/x%41", "/~user/.config", "/semi;colon", "/é", "/bad\udcffname"]
    names += ["/" + "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 24))) for _ in range(5000)]
    for name in names:
        assert path_to_uri(name) == "file://" + quote(name.encode("utf-8", "surrogateescape"), safe="/"), name
    assert path_to_uri("/plain/notes-1.txt") == "file:///plain/notes-1.txt"
    assert path_to_uri("/a b/c") == "file:///a%20b/c"
