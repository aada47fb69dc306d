"""kill -9 at random moments, with the disk changing in between: after a restart the index, the
store and the disk agree (no lost, ghost or doubled documents)."""

from __future__ import annotations

import random
import signal
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest

from .daemon_fixture import BUSY_TIMEOUT, DaemonProcess

pytestmark = pytest.mark.slow  # kills a daemon again and again


def word(i: int) -> str:
    # One unique word per file, that no stemmer shortens: qbcdx.
    return "q" + "".join("bcdfghjklm"[int(c)] for c in str(i)) + "x"


@pytest.mark.timeout(BUSY_TIMEOUT)  # the daemon's waits are measured in daemon_fixture.Patience
def test_kill_minus_nine_many_times_then_agree(tmp_path: Path):
    rnd = random.Random(20261202)
    docs = tmp_path / "docs"
    docs.mkdir()
    alive: dict[int, Path] = {}
    for i in range(400):
        sub = docs / f"d{i % 7}"
        sub.mkdir(exist_ok=True)
        p = sub / f"f{i}.txt"
        p.write_text(f"common words here and {word(i)} for file {i}\n" * 3)
        alive[i] = p
    nxt = 400
    d = DaemonProcess(tmp_path / "home", [docs])
    for round_ in range(8):
        d.start(wait=False)
        try:
            # A random moment of the daemon's own progress, not of the clock (on a busy machine a
            # fixed delay would kill it before it opened anything): once it answers, it has opened
            # the index and reconciles; then after a random number of conversions, or idle.
            d.wait_for(lambda st: True, what="the daemon answering")
            target = rnd.randint(0, 60)
            d.wait_for(lambda st, target=target: st["converted"] >= target or st["state"] == "idle", what=f"{target} conversions")
            time.sleep(rnd.uniform(0, 0.2))
        finally:
            d.stop(signal.SIGKILL)  # also when a wait failed: no daemon outlives the test
        # The disk moves on while the daemon is dead.
        for _ in range(15):
            op = rnd.random()
            if op < 0.35 and alive:
                i = rnd.choice(sorted(alive))
                alive.pop(i).unlink()
            elif op < 0.7:
                sub = docs / f"d{nxt % 7}"
                p = sub / f"f{nxt}.txt"
                p.write_text(f"common words here and {word(nxt)} for file {nxt}\n")
                alive[nxt] = p
                nxt += 1
            else:
                i = rnd.choice(sorted(alive))
                new = alive[i].with_name(f"renamed-{round_}-{alive[i].name}")
                alive[i].rename(new)
                alive[i] = new
    d.start(wait=True)
    try:
        st = d.call("status")
        assert st["documents"] == len(alive) and st["failed"] == 0, st
        assert d.call("search", query="common", limit=1)["total"] == len(alive)
        for i, p in rnd.sample(sorted(alive.items()), 60):
            assert d.search(word(i)) == [str(p)], (i, p)
        gone = [i for i in range(nxt) if i not in alive]
        for i in rnd.sample(gone, min(40, len(gone))):
            assert d.search(word(i)) == [], i
    finally:
        d.stop()
    with closing(sqlite3.connect(tmp_path / "home" / "data" / "catalog.sqlite")) as db:
        paths = sorted(r[0] for r in db.execute("SELECT path FROM docs"))
        assert paths == sorted(str(p) for p in alive.values())
        assert db.execute("SELECT count(*) FROM pending").fetchone()[0] == 0
