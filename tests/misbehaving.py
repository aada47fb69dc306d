"""A converter that misbehaves on purpose, chosen by file name: what a buggy or hostile
library could do inside a worker process (it cannot be made to happen with a real library
on demand, so this stands in for one). And the time limit a pool test of it can afford."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

from deskdex.converters import Document, Limits, Outcome, Source, plaintext
from deskdex.converters.isolation import WorkerPool

OVERRIDES = {"text/plain": "tests.misbehaving:convert"}
HELPER_SLEEP = "3599.25"  # what a helper* file's helper program sleeps: found in /proc by it
# A folder a test shares with converter processes (in their environment): a conversion of a file
# named held* adds its name to ``started`` there, then waits while ``hold`` exists there.
CONTROL = "DESKDEX_TEST_CONTROL"


def convert(source: Source, mime: str) -> Document:
    if source.name.startswith("held"):
        _held(source)
    if source.name.startswith("loop"):
        while True:
            pass
    if source.name.startswith("crash"):
        os.abort()
    if source.name.startswith("helper"):
        # A helper program that outlives its time: the worker is killed, and the helper must die too.
        from deskdex.converters import helpers

        helpers.run(helpers.Need(("sleep",), "coreutils"), [HELPER_SLEEP], source, timeout=3600)
    if source.name.startswith("hog"):
        chunks = []
        while True:
            chunks.append(bytearray(64 * 2**20))
    return plaintext.convert(source, mime)


def _held(source: Source) -> None:
    control = Path(os.environ[CONTROL])
    with open(control / "started", "a") as f:
        f.write(source.name + "\n")
    while (control / "hold").exists():
        time.sleep(0.05)


def settings_for(control: Path) -> tuple[str, dict[str, str]]:
    """What a deskdex process (the daemon, the command line) needs to convert text with this
    module: the lines of its config file, and its environment (this module is not installed)."""
    from .conftest import ROOT

    control.mkdir(parents=True, exist_ok=True)
    config = "[converters]\n" + "".join(f'"{mime}" = "{func}"\n' for mime, func in OVERRIDES.items())
    return config, {"PYTHONPATH": str(ROOT), CONTROL: str(control)}


def measured_time_limit(paths: list[Path], limits: Limits, workers: int, floor: float,
                        ) -> tuple[float, dict[str, list[Outcome]]]:
    """A per-file time limit derived from what these files need here and now, and their outcomes.

    A pool test puts a file that loops among files that end on their own (crash, eat memory up
    to the limit, convert); the limit must stop the first and never the others. Their need
    depends on the machine's load (a busy machine gives the workers a fraction of a core, and a
    memory hog filling 512 MiB then takes seconds), so they are converted first, in the same
    pool, with a limit that never triggers; twice the wall time the whole run took bounds what
    any one of them needs (a worker's start-up included), and ``floor`` keeps the usual limit on
    a quiet machine. Their outcomes are returned for the test to check as well."""
    start = time.monotonic()
    with WorkerPool(workers, dataclasses.replace(limits, time_seconds=3600.0), idle=False,
                    overrides=OVERRIDES) as pool:
        results = {s.name: outcomes for s, outcomes in pool.map(Source.from_path(p) for p in paths)}
    return max(floor, 2.0 * (time.monotonic() - start)), results
