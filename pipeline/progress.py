"""A progress bar on a terminal (``deskdex index``, ``make run``), nothing under a service manager."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Never

    from tqdm import tqdm


# A bar without an iterable yields nothing: tqdm[Never] (types-tqdm's type for tqdm(total=...)).
def progress_bar(total: int, min_total: int = 0, leave: bool = True) -> tqdm[Never] | None:
    """A bar for ``total`` files on stderr when it is a terminal and the work is worth one."""
    if not sys.stderr.isatty() or total < min_total:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="file", file=sys.stderr, dynamic_ncols=True, smoothing=0.05, leave=leave)
