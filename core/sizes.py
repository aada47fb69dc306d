"""A byte count as people read it (``2.3 MB``): one rule for the command line and the web page.
Light, like paths.py: the ``deskdex search`` fast path prints it."""

from __future__ import annotations


def human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return str(n)
