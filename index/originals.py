"""Which document of a duplicate cluster is the original: the one a search shows for its cluster
among equally matching members, and the one ``deskdex dups`` compares the others with.

The original is a file of its own (not a member of an archive: its URI has no ``#``), not named
like a copy (``copy``, ``Copy of``, ``(1)``, a trailing ``~``, ``.bak``), and the oldest; the URI
breaks the ties left, so the choice never depends on the order documents were found in.
"""

from __future__ import annotations

import re

# "report copy.txt", "Copy of report.txt", "report - Copy.txt", "report-copy.txt", "report_copy2.txt",
# "report (1).txt", "report.txt~", "report.txt.bak", "report.bak.txt": not "copyright.txt".
_COPY_NAME = re.compile(r"(?<![^\W\d_])copy(?![^\W\d_])|\(\d+\)|~$|\.bak(?:\.|$)", re.IGNORECASE)


def name_of(uri: str, path: str | None = None) -> str:
    """The last part of a document's name: a member's inner name, else the file's."""
    name = uri.rsplit("#", 1)[1] if "#" in uri else (path or uri)
    return name.rstrip("/").rsplit("/", 1)[-1]


def named_like_a_copy(name: str) -> bool:
    return _COPY_NAME.search(name) is not None


def originality(uri: str, path: str | None, mtime: float) -> tuple[bool, bool, float, str]:
    """Sort key: the smallest is the original (in a file of its own, not named like a copy, the
    oldest, then by URI)."""
    return ("#" in uri, named_like_a_copy(name_of(uri, path)), float(mtime), uri)
