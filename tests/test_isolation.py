"""Worker processes under limits: a file that loops, crashes or eats memory costs that file only."""

from __future__ import annotations

from pathlib import Path

from deskdex.converters import Limits, Source
from deskdex.converters.isolation import WorkerPool


def test_loop_crash_and_memory_hog_are_recorded_and_the_rest_converts(tmp_path: Path):
    names = ["a.txt", "loop.txt", "b.txt", "crash.txt", "c.txt", "hog.txt", "d.txt"]
    for n in names:
        (tmp_path / n).write_text(f"content of {n} with enough words to be text")
    limits = Limits(time_seconds=2.0, memory_bytes=512 * 2**20)
    # Normal priority: at idle priority a loaded test machine could starve the workers.
    with WorkerPool(2, limits, idle=False, overrides={"text/plain": "tests.misbehaving:convert"}) as pool:
        results = {s.name: outcomes for s, outcomes in pool.map(Source.from_path(tmp_path / n) for n in names)}
    assert set(results) == set(names)
    for n in ("a.txt", "b.txt", "c.txt", "d.txt"):
        assert results[n][0].ok and f"content of {n}" in results[n][0].document.text()
    assert results["loop.txt"][0].reason == "timeout"
    assert results["crash.txt"][0].reason == "crash" and "SIGABRT" in results["crash.txt"][0].message
    assert results["hog.txt"][0].reason in ("memory", "crash")
    assert "memory" in results["hog.txt"][0].message


def test_pool_processes_end_with_the_pool(tmp_path: Path):
    (tmp_path / "x.txt").write_text("hello")
    pool = WorkerPool(2, idle=False)
    list(pool.map([Source.from_path(tmp_path / "x.txt")]))
    procs = [w.process for w in pool._workers]
    pool.close()
    assert procs and all(not p.is_alive() for p in procs)
