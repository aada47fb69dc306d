"""Where the writer's own CPU goes, part by part: `deskdex index` run in this process with the writer's
steps timed by the CPU clock of the thread that runs them (time.thread_time), so tantivy's indexing
thread and the converter workers are not counted in them.

    .venv/bin/python benchmarks/writer_parts.py --home H index FOLDER --no-progress

Prints, for each part, its calls and CPU seconds, then the CPU of the main thread and of the whole
process (the difference is mostly tantivy's indexing thread: tokenizing and postings). A part's time
includes the parts it calls (``Collection.put`` holds the others but ``Indexer._checksum``).
"""

from __future__ import annotations

import atexit
import importlib
import sys
import time
from typing import Any, Callable

PARTS = [
    ("deskdex.index.collection", "Collection", "put"),
    ("deskdex.index.meaning", None, "store"),
    ("deskdex.index.duplicates", "DuplicateIndex", "add"),
    ("deskdex.index.collection", "Collection", "_index"),
    ("deskdex.index.texts", "TextStore", "put"),
    ("deskdex.converters.tagged", None, "dumps_utf8"),
    ("deskdex.index.store", "Catalog", "put"),
    ("deskdex.pipeline.indexer", "Indexer", "_checksum"),
]


def _timed(f: Callable[..., Any], key: str, totals: dict[str, list[float]]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return f(*args, **kwargs)
        finally:
            spent = totals.setdefault(key, [0, 0.0])
            spent[0] += 1
            spent[1] += time.thread_time() - start
    return timed


def main() -> None:
    totals: dict[str, list[float]] = {}
    for module, cls, name in PARTS:
        owner: Any = importlib.import_module(module)
        if cls:
            owner = getattr(owner, cls)
        setattr(owner, name, _timed(getattr(owner, name), f"{cls + '.' if cls else ''}{name}", totals))

    def report() -> None:
        for key, (calls, seconds) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
            print(f"{seconds:8.2f} s {int(calls):8d} calls  {key}", file=sys.stderr)
        print(f"{time.thread_time():8.2f} s main thread, {time.process_time():.2f} s the whole process",
              file=sys.stderr)

    atexit.register(report)
    from deskdex.clients.launch import main as deskdex

    sys.argv = ["deskdex", *sys.argv[1:]]
    deskdex()


# The fork server imports this file again as the workers' __main__ (converters/isolation.py): only
# the process started from the command line runs it.
if __name__ == "__main__":
    main()
