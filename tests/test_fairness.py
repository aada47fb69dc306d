"""Enterprise mode is fair between accounts: one account's slow files do not hold up another's.

The pool (converters/isolation.py): a file of a lane with nothing in flight gets a spare worker
once every worker holds a slow file, and the pool never runs more than its size and the spare.
The indexer on a desktop (pipeline/indexer.py): a file saved while three slow files convert is
taken in, converted and committed while they still convert.

End to end with real accounts (useradd) and the real system daemon as root: account A's three
files convert slowly (tests/misbehaving.py's ``held`` converter: a conversion that waits while a
control file exists, standing in for a slow library or helper, which cannot be made slow on
demand); meanwhile account B saves a one-line file and searches for it as B, through the socket.
It must be found within 5 s, while A's files still convert; then A's files are released and
indexed too (nothing lost)."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from deskdex.converters import Limits, Source
from deskdex.converters.isolation import SLOW_FILE, Wakeup, WorkerPool, release_fork_server
from deskdex.index import Collection
from deskdex.pipeline.indexer import Indexer
from deskdex.pipeline.scan import FileInfo
from deskdex.pipeline.turns import STARVE, FairQueue

from . import misbehaving
from .accounts import IS_ROOT, Users, missing_tools, run_as
from .daemon_fixture import BUSY_TIMEOUT, DaemonProcess, Patience

needs_root = pytest.mark.skipif(not IS_ROOT, reason="needs root: useradd, setpriv, the system daemon")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUSY_TIMEOUT)]  # workers, daemons, accounts

FAIR_SECONDS = 5.0  # the requirement: B's new file searchable within this, A's slow files converting
WORKERS = 2

# Run as B with the system's Python and nothing but its standard library (starts in tens of ms):
# saves a one-line file, then searches for its word through the daemon's socket until it is
# found; prints how long that took.
PROBE = r"""
import json, socket, sys, time
sock_path, path, word, limit = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
with open(path, "w") as f:
    f.write(word + " saved by the second account\n")
start = time.monotonic()
s = socket.socket(socket.AF_UNIX)
s.connect(sock_path)
f = s.makefile("rwb")
reply = None
while time.monotonic() - start < limit:
    f.write(json.dumps({"op": "search", "query": word, "limit": 10}).encode() + b"\n")
    f.flush()
    reply = json.loads(f.readline())
    if reply.get("ok") and any(h["path"] == path for h in reply["result"]["hits"]):
        print(json.dumps({"found": time.monotonic() - start}))
        break
    time.sleep(0.05)
else:
    print(json.dumps({"found": None, "last": reply}))
"""


@pytest.fixture
def control(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The held converter's control folder (tests/misbehaving.py), ``hold`` in place; removed at
    the end whatever happens, so that no conversion waits for ever."""
    folder = tmp_path / "control"
    folder.mkdir()
    (folder / "hold").write_text("")
    monkeypatch.setenv(misbehaving.CONTROL, str(folder))
    release_fork_server()  # workers take their environment from the fork server: a new one has CONTROL
    yield folder
    (folder / "hold").unlink(missing_ok=True)
    release_fork_server()


def _release_after(control: Path, seconds: float) -> threading.Timer:
    """Let held conversions end after ``seconds`` at the latest: a test that fails does not hang."""
    timer = threading.Timer(seconds, lambda: (control / "hold").unlink(missing_ok=True))
    timer.start()
    return timer


def test_a_lane_with_nothing_in_flight_gets_the_spare_worker(tmp_path: Path, control: Path):
    held = [tmp_path / f"held{i}.txt" for i in range(2)]
    quick = tmp_path / "quick.txt"
    for p in held + [quick]:
        p.write_text(f"{p.stem} text\n")
    lanes = {Source.from_path(p).uri: "slow" if p in held else "new" for p in held + [quick]}
    timer = _release_after(control, 120)
    got: list[tuple[str, bool, int]] = []  # (name, still held, workers running)
    try:
        with WorkerPool(1, Limits(time_seconds=600), idle=False, overrides=misbehaving.OVERRIDES) as pool:
            def sources() -> Iterator[Source | None]:
                for p in held:
                    yield Source.from_path(p)
                while not pool.has_room(None, "new"):  # as the indexer asks (pipeline/turns.py)
                    yield None
                yield Source.from_path(quick)

            start = time.monotonic()
            for source, outcomes in pool.map(sources(), lane=lambda s: lanes[s.uri]):
                assert outcomes[0].document is not None, outcomes[0].message
                got.append((source.name, (control / "hold").exists(), len(pool.pids())))
                if source.name == "quick.txt":
                    took = time.monotonic() - start
                    (control / "hold").unlink()
    finally:
        timer.cancel()
    # The small file came first, while both slow ones were held in the one worker of the pool's
    # size: it did not wait in that worker's pipe behind them, nor for them to end.
    assert got[0] == ("quick.txt", True, 2), (got, took)
    assert sorted(name for name, *_ in got) == ["held0.txt", "held1.txt", "quick.txt"]
    assert max(n for *_, n in got) <= 2  # the pool's size, and one spare


def test_a_starving_lane_keeps_only_the_room_it_could_take(tmp_path: Path, control: Path):
    """A lane refused a worker for STARVE seconds is served first, but the spare, which it
    cannot take while its own files convert, still goes to a lane with nothing in flight:
    account A's third slow file, come after its first two turned slow, must not keep account
    B's file waiting for A's conversions (the system daemon's test below failed so in CI, when
    the watcher handed A's files over in two batches)."""
    held = [tmp_path / f"held{i}.txt" for i in range(3)]
    quick = tmp_path / "quick.txt"
    for p in held + [quick]:
        p.write_text(f"{p.stem} text\n")
    info = {p: FileInfo(str(p), p.stat().st_size, p.stat().st_mtime) for p in held + [quick]}
    queue = FairQueue(lambda _: 0)
    for p in held[:2]:
        queue.push(info[p], "A")
    timer = _release_after(control, 120)
    got: list[tuple[str, bool]] = []  # (name, still held)
    pushed: dict[str, float] = {}
    try:
        with WorkerPool(2, Limits(time_seconds=600), idle=False, overrides=misbehaving.OVERRIDES) as pool:
            def sources() -> Iterator[Source | None]:
                while True:
                    taken = queue.pop(lambda lane, spare_only: pool.has_room(None, lane, spare_only))
                    if taken is not None:
                        yield Source.from_path(taken[0].path)
                        continue
                    now = time.monotonic()
                    if "held2" not in pushed and len(_held_started(control)) >= 2:
                        time.sleep(SLOW_FILE)  # both turned slow: A's third file is refused room
                        queue.push(info[held[2]], "A")
                        pushed["held2"] = time.monotonic()
                    elif "held2" in pushed and "quick" not in pushed and now - pushed["held2"] > STARVE + 0.5:
                        queue.push(info[quick], "B")  # A starves by now
                        pushed["quick"] = now
                    elif "quick" in pushed and not queue:
                        return
                    yield None

            for source, outcomes in pool.map(sources(), lane=lambda s: "B" if s.name == "quick.txt" else "A",
                                             tick=lambda: 0.05):
                assert outcomes[0].document is not None, outcomes[0].message
                got.append((source.name, (control / "hold").exists()))
                if source.name == "quick.txt":
                    (control / "hold").unlink(missing_ok=True)
    finally:
        timer.cancel()
    assert got[0] == ("quick.txt", True), got
    assert sorted(name for name, _ in got) == ["held0.txt", "held1.txt", "held2.txt", "quick.txt"]


def test_a_file_saved_meanwhile_does_not_wait_for_slow_ones(tmp_path: Path, control: Path):
    """A desktop daemon's pass (no accounts): three slow files convert on both workers; a file
    saved meanwhile is taken in (``intake``, woken by ``wake`` as the watcher would), converted on
    the spare and committed, where another connection sees it, while they still convert."""
    docs, data = tmp_path / "docs", tmp_path / "data"
    docs.mkdir()
    held = [docs / f"held{i}.txt" for i in range(3)]
    for i, p in enumerate(held):
        p.write_text(f"tortoise slow file {i}\n")  # each its own bytes: a copy would wait for the first
    quick = docs / "quick.txt"
    wake = Wakeup()
    saved: dict[str, float] = {}

    def intake() -> tuple[list[FileInfo], list[str]]:
        if "at" not in saved or "taken" in saved:
            return [], []
        saved["taken"] = time.monotonic()
        st = quick.stat()
        return [FileInfo(str(quick), st.st_size, st.st_mtime)], [str(quick)]

    def save_and_look() -> None:
        """Another process's part: save a file once the slow ones convert, then look for it in
        the committed catalog, and let the slow ones end."""
        try:
            while len(_held_started(control)) < 2 and (control / "hold").exists():
                time.sleep(0.05)
            quick.write_text("hummingbird saved meanwhile\n")
            saved["at"] = time.monotonic()
            saved["patience"] = Patience()  # type: ignore[assignment]
            wake.set()
            with Collection.open(str(data)) as view:
                while (control / "hold").exists():
                    if view.get(quick.as_uri()) is not None:
                        saved["found"] = time.monotonic()
                        saved["waited"] = saved["patience"].waited()  # type: ignore[attr-defined]
                        break
                    time.sleep(0.05)
        finally:
            (control / "hold").unlink(missing_ok=True)

    timer = _release_after(control, 120)
    looker = threading.Thread(target=save_and_look)
    try:
        with Collection.open(str(data), writable=True) as coll:
            indexer = Indexer(coll, Limits(time_seconds=600), workers=2, overrides=misbehaving.OVERRIDES)
            try:
                looker.start()
                files = [FileInfo(str(p), p.stat().st_size, p.stat().st_mtime) for p in held]
                summary = indexer.update(files, intake=intake, wake=wake)
                coll.commit()
            finally:
                indexer.release()
    finally:
        timer.cancel()
        looker.join()
        wake.close()
    assert "found" in saved, f"the saved file was committed only after the slow ones: {saved}"
    took, waited = saved["found"] - saved["at"], saved["waited"]
    print(f"saved file committed after {took:.2f} s ({waited:.2f} s of a quiet machine)")
    assert took <= FAIR_SECONDS or waited <= FAIR_SECONDS, (took, waited)
    assert summary.indexed == 4 and not summary.failed, summary


def _held_started(control: Path) -> list[str]:
    try:
        return (control / "started").read_text().split()
    except FileNotFoundError:
        return []


def _workers_of(uids: set[int]) -> list[int]:
    """Converter processes running as one of ``uids`` (a worker drops to its account for good)."""
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            uid = os.stat(f"/proc/{pid}").st_uid
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if uid in uids and b"forkserver" in cmdline:
            found.append(int(pid))
    return found


@needs_root
def test_a_slow_account_does_not_hold_up_another(open_dir: Path):
    if missing_tools() or not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip(f"missing {', '.join(missing_tools()) or '/usr/bin/python3'}")
    users = Users()
    daemon = None
    control = open_dir / "control"
    try:
        pa, pb = users.create()
        ha, hb = Path(pa.pw_dir), Path(pb.pw_dir)
        ha.chmod(0o700)
        hb.chmod(0o700)
        converters, env = misbehaving.settings_for(control)
        control.chmod(0o777)  # A's converters, running as A, write there
        (control / "hold").write_text("")
        script = open_dir / "probe.py"
        script.write_text(PROBE)
        script.chmod(0o644)

        home = open_dir / "home"
        names = ", ".join(json.dumps(n) for n in (users.a, users.b))
        daemon = DaemonProcess(home, [], args=("--system",), env=env,
                               extra_config=f"accounts = [{names}]\nworkers = {WORKERS}\n" + converters)
        daemon.start()

        # A's three slow files: each conversion waits while control/hold exists.
        for i in range(3):
            p = ha / f"held{i}.txt"
            p.write_text(f"tortoise slow file {i}\n")
            os.chown(p, pa.pw_uid, pa.pw_gid)
        patience = daemon.patience()
        while len(_held_started(control)) < WORKERS and not patience.over():
            time.sleep(0.1)
        assert len(_held_started(control)) >= WORKERS, f"A's files never started converting; waited {patience}"

        # B saves a file and searches for it as B, through the socket.
        target = hb / "quick.txt"
        patience = Patience(pid=daemon.proc.pid if daemon.proc else None)
        p = run_as(users.b, ["/usr/bin/python3", str(script), daemon.socket, str(target), "hummingbird", "120"],
                   open_dir, hb, timeout=180)
        waited = patience.waited()
        assert p.returncode == 0, p.stderr
        result = json.loads(p.stdout)
        print(f"B's file searchable after {result['found']} s (wall clock), {waited:.1f} s of a quiet machine")
        assert result["found"] is not None, (f"never found: {result}, waited {waited:.1f} s of a quiet machine; "
                                             f"status {daemon.call('status')}\n{daemon.log.read_text()[-3000:]}")
        # Seconds of a quiet machine (daemon_fixture.Patience): the daemon works at idle priority,
        # and a machine busy with other work stretches any wall-clock figure at will.
        assert result["found"] <= FAIR_SECONDS or waited <= FAIR_SECONDS + 1.0, (
            f"B's file took {result['found']:.1f} s ({waited:.1f} s of a quiet machine)\n"
            f"{daemon.log.read_text()[-3000:]}")
        # A's files were still converting: B's did not merely come after them.
        assert (control / "hold").exists() and daemon.search("tortoise") == []
        # The daemon's converters stay bounded: the setting workers, and one spare.
        assert len(_workers_of({pa.pw_uid, pb.pw_uid})) <= WORKERS + 1

        # Released, A's files are indexed too: nothing was lost or failed.
        (control / "hold").unlink()
        daemon.eventually("tortoise", [str(ha / f"held{i}.txt") for i in range(3)])
        daemon.wait_for(lambda st: st["state"] == "idle" and st["queue"] == 0, what="the daemon idle")
        assert daemon.search("hummingbird") == [str(target)]
        assert daemon.call("status", failures=True)["failed"] == 0
    finally:
        if control.exists() and (control / "hold").exists():
            (control / "hold").unlink()
        if daemon is not None and daemon.proc is not None:
            daemon.stop()
        users.remove()
        shutil.rmtree(control, ignore_errors=True)
