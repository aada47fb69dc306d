"""Progress of indexing: a callback per batch of files done, and a bar on a terminal (``deskdex
index``, ``make run``), nothing under a service manager."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterator

Progress = Callable[[int, str], None]  # (files done since the last call, current path)


@contextmanager
def with_bar(total: int, then: Progress | None = None, min_total: int = 0, leave: bool = True) -> Iterator[
        Progress | None]:
    """``then``, showing a bar for ``total`` files on stderr too when it is a terminal and the work
    is worth one; the bar is closed on leaving."""
    if not sys.stderr.isatty() or total < min_total:
        yield then
        return
    from tqdm import tqdm

    bar = tqdm(total=total, unit="file", file=sys.stderr, dynamic_ncols=True, smoothing=0.05, leave=leave)

    def progress(n: int, path: str) -> None:
        bar.update(n)
        if then is not None:
            then(n, path)

    try:
        yield progress
    finally:
        bar.close()
