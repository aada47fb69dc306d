"""Live changes end to end: after any burst of changes, once the daemon says idle, the index equals
the disk (same paths, same content checksums), with no ghost and no lost document; and the daemon's
queue shows the work it has to go. The full 10 x 2,000-operation bursts: benchmarks/live_burst.py."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Iterator

import pytest

from deskdex.pipeline.scan import Excluder, FileInfo

from .daemon_fixture import BUSY_TIMEOUT, DaemonProcess
from .live_burst import COMMON, Burst, catalog_state, digest, explain, settle_and_compare

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUSY_TIMEOUT)]  # the daemon's waits are measured in daemon_fixture.Patience

EXCLUDED = Excluder().excluded


def marker_word(n: int) -> str:
    return "qmark" + "".join("bcdfghjklm"[int(c)] for c in str(n)) + "x"


def test_seeded_bursts_leave_the_index_equal_to_the_disk(tmp_path: Path):
    burst = Burst(tmp_path / "docs", tmp_path / "outside", seed=1402)
    burst.seed_tree(60, folders=6)
    d = DaemonProcess(tmp_path / "home", [burst.root]).start()
    try:
        for n in range(2):
            burst.rnd.seed(1402 * 1000 + n)
            burst.run(200, pause_every=25, longest_pause=0.5)
            diff = settle_and_compare(d, burst.root, burst.root / f"marker-{n}.txt", marker_word(n), EXCLUDED)
            assert diff.ok, "\n".join([f"burst {n} ({dict(burst.counts)}):", *explain(diff, d.home / "data")])
        # Folders went out of the tree and came back, renamed, deleted: the bursts did what they say.
        assert {"move_dir_out", "move_dir_in", "rename_dir", "save_then_delete", "save_then_rename"} <= set(burst.counts)
    finally:
        d.stop()


def test_editor_save_then_delete_or_rename_at_once_leaves_no_ghost(tmp_path: Path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("a.txt", "b.txt", "c.txt", "d.txt"):
        (docs / name).write_text(f"{COMMON} first version of {name}\n")
    d = DaemonProcess(tmp_path / "home", [docs]).start()
    try:
        # Within one debounce window: a save through an excluded temp name and through an
        # ordinary one, each followed at once by a delete or a rename.
        for name, temp, then in (("a.txt", ".a.txt.swp", "delete"), ("b.txt", "b.txt.new", "delete"),
                                 ("c.txt", "c.txt.tmp", "rename"), ("d.txt", "d.txt.new", "rename")):
            (docs / temp).write_text(f"{COMMON} saved {name} qsavedx\n")
            os.replace(docs / temp, docs / name)
            if then == "delete":
                (docs / name).unlink()
            else:
                os.rename(docs / name, docs / f"renamed-{name}")
        diff = settle_and_compare(d, docs, docs / "marker.txt", marker_word(0), EXCLUDED)
        assert diff.ok, diff
        assert sorted(catalog_state(d.home / "data")) == [str(docs / n) for n in
                                                          ("marker.txt", "renamed-c.txt", "renamed-d.txt")]
        d.eventually("qsavedx", [str(docs / "renamed-c.txt"), str(docs / "renamed-d.txt")])
    finally:
        d.stop()


def test_rename_during_the_reconcile_is_followed(tmp_path: Path):
    """Files and a folder renamed while the start-up reconcile works through them: some were
    listed by its scan but not indexed yet. A duty cycle (cpu_budget) makes the reconcile rest
    most of the time, so the renames land in the middle of it."""
    docs = tmp_path / "docs"
    (docs / "box").mkdir(parents=True)
    for i in range(200):
        (docs / "box" / f"f{i:03d}.txt").write_text(f"{COMMON} boxed file number q{i}x\n")
    for i in range(60):
        (docs / f"loose{i:03d}.txt").write_text(f"{COMMON} loose file number q{i}x\n")
    d = DaemonProcess(tmp_path / "home", [docs], extra_config="cpu_budget = 10\nworkers = 1\n").start(wait=False)
    try:
        st = d.wait_for(lambda st: st["state"] == "indexing" and st["queue"] > 0, what="the reconcile under way")
        os.rename(docs / "box", docs / "crate")
        for i in range(0, 60, 3):
            os.rename(docs / f"loose{i:03d}.txt", docs / f"moved{i:03d}.txt")
        diff = settle_and_compare(d, docs, docs / "marker.txt", marker_word(0), EXCLUDED)
        assert diff.ok, diff
        assert "vanished" in d.log.read_text(), f"the renames came after the reconcile: {st}; the test proves nothing"
        assert d.call("status")["failed"] == 0
    finally:
        d.stop()


def test_rename_while_waiting_for_conversion_leaves_no_failed_row(tmp_path: Path):
    """A file renamed after its checksum, before its converter opens it, is not a failure: the
    watcher's Moved brings it back under its new name, converted, with no `vanished` row that
    would survive restarts. The generator hands the indexer its files: the rename happens when the
    indexer asks for the next one, right after sending this one to a converter that is starting."""
    from deskdex.converters.limits import Limits
    from deskdex.index import Collection
    from deskdex.pipeline.coalesce import Moved
    from deskdex.pipeline.follow import follow
    from deskdex.pipeline.indexer import Indexer

    docs = tmp_path / "docs"
    docs.mkdir()
    first, waiting, renamed = docs / "first.txt", docs / "waiting.txt", docs / "renamed.txt"
    first.write_text(f"{COMMON} first in line\n" * 2000)
    waiting.write_text(f"{COMMON} waits for its turn\n")

    def files() -> Iterator[FileInfo]:
        for p in (first, waiting):
            st = p.stat()
            yield FileInfo(str(p), st.st_size, st.st_mtime)
        os.rename(waiting, renamed)  # waiting.txt is checksummed and queued in the converter's pipe

    with Collection.open(str(tmp_path / "data"), writable=True) as coll:
        indexer = Indexer(coll, Limits(), workers=1)
        try:
            summary = indexer.update(files())
            assert summary.failed == {"vanished": 1} and summary.indexed == 1, summary
            assert coll.get(waiting.as_uri()) is None  # nothing recorded under the old name
            indexer.update(follow(indexer, [Moved(str(waiting), str(renamed))], [str(docs)], Excluder()))
            coll.commit()
            row = coll.get(renamed.as_uri())
            assert row is not None and row.status == "ok" and row.raw_sum == digest(renamed.read_bytes())
            assert [r.uri for r in coll.catalog.rows("status != 'ok'")] == []
        finally:
            indexer.release()


def test_a_file_put_in_place_of_a_lookalike_is_read(tmp_path: Path):
    """Files written in the same clock tick with the same size have the same size and mtime (the
    kernel's timestamps are coarse unless someone looks at them in between). A file renamed onto
    an indexed one, or saved over it through a temp name, must not pass for it. os.utime makes
    the likeness certain here."""
    from deskdex.converters.limits import Limits
    from deskdex.index import Collection
    from deskdex.pipeline.coalesce import Changed, Moved
    from deskdex.pipeline.follow import follow
    from deskdex.pipeline.indexer import Indexer

    docs = tmp_path / "docs"
    docs.mkdir()
    a, b = docs / "a.txt", docs / "b.txt"
    a.write_text(f"{COMMON} qoldax\n")
    b.write_text(f"{COMMON} qoldbx\n")
    stamp = (1_700_000_000_000_000_000, 1_700_000_000_000_000_000)
    for f in (a, b):
        os.utime(f, ns=stamp)

    def lookalike(name: str, word: str) -> Path:
        f = docs / name
        f.write_text(f"{COMMON} {word}\n")
        os.utime(f, ns=stamp)
        return f

    with Collection.open(str(tmp_path / "data"), writable=True) as coll:
        indexer = Indexer(coll, Limits(), workers=1)
        try:
            indexer.update(follow(indexer, [Changed(str(a), True), Changed(str(b), True)], [str(docs)], Excluder()))
            # Renamed onto a.txt before it was indexed under its own name: nothing to move.
            os.rename(lookalike("c.txt", "qnewax"), a)
            # Saved over b.txt through an excluded temp name.
            os.replace(lookalike(".b.txt.swp", "qnewbx"), b)
            records = [Moved(str(docs / "c.txt"), str(a)), Changed(str(b), new_file=True)]
            indexer.update(follow(indexer, records, [str(docs)], Excluder()))
            coll.commit()
            for f in (a, b):
                row = coll.get(f.as_uri())
                assert row is not None and row.raw_sum == digest(f.read_bytes()), f
        finally:
            indexer.release()


def test_a_file_swapped_between_its_look_and_its_read_is_recorded_as_read(tmp_path: Path):
    """The size and mtime recorded with a checksum are those of the bytes read, not of the look
    before: a row pairing one file's size and mtime with another's bytes passed for up to date
    wherever the watcher's moves carried it (found by benchmarks/live_burst.py, with swaps)."""
    from deskdex.converters.limits import Limits
    from deskdex.index import Collection
    from deskdex.pipeline.indexer import Indexer

    docs = tmp_path / "docs"
    docs.mkdir()
    p, other = docs / "p.txt", docs / "other.txt"
    p.write_text(f"{COMMON} short\n")
    other.write_text(f"{COMMON} a longer text that was elsewhere when p.txt was looked at\n")

    def files() -> Iterator[FileInfo]:
        st = p.stat()  # the look
        os.rename(p, docs / "p.tmp")  # then a swap, before the indexer reads p.txt
        os.rename(other, p)
        os.rename(docs / "p.tmp", other)
        yield FileInfo(str(p), st.st_size, st.st_mtime)

    with Collection.open(str(tmp_path / "data"), writable=True) as coll:
        indexer = Indexer(coll, Limits(), workers=1)
        try:
            indexer.update(files())
            coll.commit()
            row, st = coll.get(p.as_uri()), p.stat()
            assert row is not None and row.raw_sum == digest(p.read_bytes())
            assert (row.size, row.mtime) == (st.st_size, st.st_mtime)
        finally:
            indexer.release()


def test_queue_counts_the_files_of_the_batch_under_way(tmp_path: Path, home: Path):
    """A folder copied in arrives as one batch; while it is indexed, the queue says how many of its
    files are left (it said 0: the records had left the queue). Every file done is seen from the
    daemon's own progress callback, so nothing is timed."""
    from deskdex import settings
    from deskdex.daemon.loop import Daemon
    from deskdex.paths import Home
    from deskdex.pipeline.coalesce import Changed

    docs = tmp_path / "docs"
    docs.mkdir()
    paths = []
    for i in range(40):
        p = docs / f"copied{i:02d}.txt"
        p.write_text(f"{COMMON} copied file q{i}x\n")
        paths.append(p)
    h = Home.resolve(str(home)).ensure()
    Path(h.config_file).write_text(f'folders = ["{docs}"]\nworkers = 1\n')

    class Observed(Daemon):
        seen: list[int] = []

        def _progress(self, n: int, path: str) -> None:
            self.seen.append(self.queue_length())
            super()._progress(n, path)

    d = Observed(settings.load(h))
    try:
        d.apply([Changed(str(p)) for p in paths], set())
        assert d.seen == list(range(40, 0, -1)), d.seen
        assert d.queue_length() == 0
    finally:
        d.close()


def test_moved_out_folder_events_do_not_touch_its_old_path(tmp_path: Path):
    """A folder moved out of the tree must not be followed under its old path (watchdog kept watching
    it there: a file deleted out there was reported as deleted at the old path, where a new file of
    the same name may live). Our watcher drops its watches; and what is on disk decides anyway, so
    the new file stays."""
    docs, outside = tmp_path / "docs", tmp_path / "outside"
    (docs / "f").mkdir(parents=True)
    outside.mkdir()
    (docs / "f" / "note.txt").write_text(f"{COMMON} old note\n")
    d = DaemonProcess(tmp_path / "home", [docs]).start()
    try:
        os.rename(docs / "f", outside / "f")
        diff = settle_and_compare(d, docs, docs / "marker0.txt", marker_word(0), EXCLUDED)
        assert diff.ok, diff
        (docs / "f").mkdir()
        (docs / "f" / "note.txt").write_text(f"{COMMON} new note qnewnotex\n")
        diff = settle_and_compare(d, docs, docs / "marker1.txt", marker_word(1), EXCLUDED)
        assert diff.ok, diff
        (outside / "f" / "note.txt").unlink()  # out of the tree, but still watched under docs/f
        shutil.rmtree(outside / "f")
        diff = settle_and_compare(d, docs, docs / "marker2.txt", marker_word(2), EXCLUDED)
        assert diff.ok, diff
        d.eventually("qnewnotex", [str(docs / "f" / "note.txt")])
    finally:
        d.stop()


def test_burst_helper_counts_ghosts_and_lost(tmp_path: Path):
    """The comparison itself can fail: a catalog that lags the disk is reported."""
    from .live_burst import compare

    disk = {"/d/a": "1", "/d/b": "2", "/d/c": "3"}
    catalog: dict[str, str | None] = {"/d/a": "1", "/d/b": "9", "/d/gone": "4", "/d/failed": None}
    diff = compare(disk, catalog, {"/d/a", "/d/b", "/d/gone"})
    assert (diff.ghosts, diff.lost, diff.stale, diff.unsearchable) == (["/d/failed", "/d/gone"], ["/d/c"], ["/d/b"], [])
    assert not diff.ok and re.search("ghosts", str(diff))
