"""Worker processes under limits: a file that loops, crashes or eats memory costs that file only."""

from __future__ import annotations

from pathlib import Path

from deskdex.converters import Limits, Outcome, Source
from deskdex.converters.isolation import WorkerPool

from .misbehaving import OVERRIDES, measured_time_limit


def test_loop_crash_and_memory_hog_are_recorded_and_the_rest_converts(tmp_path: Path):
    names = ["a.txt", "loop.txt", "b.txt", "crash.txt", "c.txt", "hog.txt", "d.txt"]
    for n in names:
        (tmp_path / n).write_text(f"content of {n} with enough words to be text")
    memory = Limits(memory_bytes=512 * 2**20)

    def check(results: dict[str, list[Outcome]]) -> None:
        for n in ("a.txt", "b.txt", "c.txt", "d.txt"):
            assert results[n][0].ok and f"content of {n}" in results[n][0].document.text()  # type: ignore[union-attr]
        assert results["crash.txt"][0].reason == "crash" and "SIGABRT" in results["crash.txt"][0].message
        assert results["hog.txt"][0].reason in ("memory", "crash"), results["hog.txt"]
        assert "memory" in results["hog.txt"][0].message

    # The limit is derived from what the others need here and now (a busy machine slows the hog).
    ending = [tmp_path / n for n in names if n != "loop.txt"]
    limit, first = measured_time_limit(ending, memory, workers=2, floor=2.0)
    assert set(first) == {p.name for p in ending}
    check(first)
    # Normal priority: at idle priority a loaded test machine could starve the workers.
    with WorkerPool(2, Limits(time_seconds=limit, memory_bytes=memory.memory_bytes), idle=False,
                    overrides=OVERRIDES) as pool:
        results = {s.name: outcomes for s, outcomes in pool.map(Source.from_path(tmp_path / n) for n in names)}
    assert set(results) == set(names)
    check(results)
    assert results["loop.txt"][0].reason == "timeout"
    assert results["loop.txt"][0].message == f"conversion took over {limit:g} s"


def test_pool_processes_end_with_the_pool(tmp_path: Path):
    (tmp_path / "x.txt").write_text("hello")
    pool = WorkerPool(2, idle=False)
    list(pool.map([Source.from_path(tmp_path / "x.txt")]))
    procs = [w.process for w in pool._workers]
    pool.close()
    assert procs and all(not p.is_alive() for p in procs)
