"""Worker processes under limits: a file that loops, crashes or eats memory costs that file only."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from deskdex.converters import Limits, Outcome, Source
from deskdex.converters.isolation import WorkerPool

from .misbehaving import HELPER_SLEEP, OVERRIDES, measured_time_limit


@pytest.mark.slow
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
    # The floor is what the hog has taken at worst beside a looping worker on a loaded CI machine
    # (filling 512 MiB page by page took over 2 s there, 0.4-1 s on a quiet one).
    ending = [tmp_path / n for n in names if n != "loop.txt"]
    limit, first = measured_time_limit(ending, memory, workers=2, floor=5.0)
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


def _helpers_running() -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"/usr/bin/sleep", HELPER_SLEEP.encode()] or argv[:2] == [b"/bin/sleep", HELPER_SLEEP.encode()]:
            found.append(int(pid))
    return found


@pytest.mark.slow
def test_a_helper_program_dies_with_its_worker_at_the_time_limit(tmp_path: Path):
    """A helper (antiword, djvutxt...) that hangs: the worker is killed at the time limit and the
    helper with it (PR_SET_PDEATHSIG), so nothing is left running; the next file converts."""
    for n in ("helper.txt", "after.txt"):
        (tmp_path / n).write_text(f"content of {n} with enough words to be text")
    assert not _helpers_running()
    with WorkerPool(1, Limits(time_seconds=3.0), idle=False, overrides=OVERRIDES) as pool:
        results = {s.name: o for s, o in pool.map(Source.from_path(tmp_path / n) for n in ("helper.txt", "after.txt"))}
        assert results["helper.txt"][0].reason == "timeout", results
        assert results["after.txt"][0].ok
        deadline = time.monotonic() + 5
        while _helpers_running() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _helpers_running(), "the helper program outlived its killed worker"


@pytest.mark.slow
def test_a_worker_whose_heap_grew_hands_over_to_a_fresh_one(tmp_path: Path):
    """After a long text the worker's heap stays grown (freed memory is not given back): it ends
    once that file's result is sent, and a fresh worker converts the rest. Nothing is lost."""
    big = tmp_path / "big.txt"
    with big.open("w") as f:
        for i in range(150_000):  # 150,000 paragraphs: as many blocks, well over 32 MiB of objects
            f.write(f"paragraph {i} of a long text about the harbour and its {i % 97} ships\n\n")
    small = [tmp_path / f"small{i}.txt" for i in range(4)]
    for p in small:
        p.write_text(f"a short note called {p.stem}")
    workers: list[list[int]] = []
    with WorkerPool(1, Limits(time_seconds=120), idle=False) as pool:
        for path in [small[0], big, *small[1:]]:
            [(_, outcomes)] = list(pool.map([Source.from_path(path)]))
            doc = outcomes[0].document
            assert doc is not None and path.stem in Path(doc.uri).stem, outcomes[0]
            workers.append(pool.pids())
    assert "paragraph 149999 " in _text_of(big)
    before, after_big, *rest = workers
    assert after_big == [] or after_big != before  # the one that read big.txt ended after it
    assert all(r == rest[0] and r != before for r in rest)  # a fresh one read the rest


def _text_of(path: Path) -> str:
    with WorkerPool(1, Limits(time_seconds=120), idle=False) as pool:
        [(_, outcomes)] = list(pool.map([Source.from_path(path)]))
    assert outcomes[0].document is not None
    return outcomes[0].document.text()


def test_tasks_carrying_large_bytes_are_not_queued_into_a_full_pipe():
    # A message from a mail account or a member of an archive travels to the worker with its bytes.
    # Queued behind another file, a large one filled the pipe: its send blocked while the worker
    # blocked sending its last result back, until the time limit killed the worker.
    body = ("word " * 60_000).encode()  # 300 KB each, well over a pipe's 64 KB
    sources = [Source(uri=f"mem:{i}", name=f"note{i}.txt", data=body + str(i).encode()) for i in range(6)]
    started = time.monotonic()
    with WorkerPool(1, Limits(time_seconds=30)) as pool:
        got = {s.uri: outcomes for s, outcomes in pool.map(sources)}
    assert sorted(got) == sorted(s.uri for s in sources)
    assert all(o[0].ok for o in got.values()), [(u, o[0].reason) for u, o in got.items() if not o[0].ok]
    assert time.monotonic() - started < 25  # not one time limit waited out
