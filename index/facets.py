"""Facets of a search: the matches counted by type, language, folder and year, each value with the
query-language text that narrows the query to it (docs/search.md, "Facets").

Counted over the first MAX_COUNTED matches in the search's order, every copy counted (before
duplicates are collapsed), for a reader of an enterprise-mode daemon among what that reader may
read alone (index/search.py picks them). Each count is what adding the value's ``filter`` to the
query would find among those matches:

- type: ``type:GROUP`` when the MIME type is in a group of ``type:`` (index/query.py's
  TYPE_GROUPS), else ``ext:EXT``, counting every match with that extension;
- lang: ``lang:CODE``;
- folder: ``in:"/the/folder"`` for each match's own folder, counting the matches in that folder
  and in the folders under it, as ``in:`` finds them;
- year: ``after:YEAR before:YEAR+1``, the year of the modification time in local time, as
  ``after:`` and ``before:`` read a year.

A value no filter can name (a folder holding ``"``, an extension with a space or bracket, no
extension) is left out.
"""

from __future__ import annotations

import bisect
import datetime as dt
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .query import type_group

if TYPE_CHECKING:
    import tantivy

    from deskdex.protocol import Facets, FacetValue

MAX_COUNTED = 1000  # matches counted, at most
MAX_VALUES = 12  # values listed of each facet, at most
_EXT = re.compile(r"^[^\s()\"]+$")  # an extension ext: takes as one word


@dataclass
class FacetCounts:
    """The counts of one or more collections' matches, merged with ``add`` (a search over several
    shards), listed by ``answer``. Raw values are counted per match (the cost of a facet search is
    in reading the matches: a few microseconds each here); what they mean is worked out once per
    distinct value, in ``answer``."""

    counted: int = 0
    kinds: Counter[tuple[str, str]] = field(default_factory=Counter)  # (MIME type, extension)
    langs: Counter[str] = field(default_factory=Counter)
    folders: Counter[str] = field(default_factory=Counter)  # matches in each folder itself
    years: Counter[int] = field(default_factory=Counter)

    def count(self, stored: dict[str, list[Any]]) -> None:
        """Count one match, from its stored fields (a tantivy document's ``to_dict()``)."""
        self.counted += 1
        get = stored.get
        self.kinds[(get("mime") or [""])[0], (get("ext") or [""])[0]] += 1
        lang = get("lang")
        if lang and lang[0]:
            self.langs[lang[0]] += 1
        path = get("path")
        if path and path[0] and (get("source") or ["files"])[0] == "files":
            self.folders[path[0].rpartition("/")[0]] += 1  # os.path.dirname's, without its cost per match
        mtime = get("mtime")
        year = _year(int(mtime[0]) if mtime else 0)
        if year is not None:
            self.years[year] += 1

    def add(self, other: FacetCounts) -> None:
        self.counted += other.counted
        self.kinds.update(other.kinds)
        self.langs.update(other.langs)
        self.folders.update(other.folders)
        self.years.update(other.years)

    def answer(self) -> Facets:
        """The ``facets`` member of a search's answer (deskdex.protocol's Facets)."""
        groups: Counter[str] = Counter()
        exts: Counter[str] = Counter()  # every counted match's extension
        ungrouped: set[str] = set()  # extensions of matches of no type group
        for (mime, ext), n in self.kinds.items():
            group, ext = type_group(mime), ext.lower()
            if group is not None:
                groups[group] += n
            if ext:
                exts[ext] += n
                if group is None and _EXT.match(ext):
                    ungrouped.add(ext)
        under: Counter[str] = Counter()  # matches in each folder or below it
        for folder, n in self.folders.items():
            for above in _ancestors(_folder(folder)):
                under[above] += n
        # A folder holding '"' cannot be named by in:"..."; the folders above it still count it.
        named = {f for f in map(_folder, self.folders) if '"' not in f}
        types = [(g, n, f"type:{g}") for g, n in groups.items()] + [(e, exts[e], f"ext:{e}") for e in ungrouped]
        return {
            "type": _top(types),
            "lang": _top([(code, n, f"lang:{code}") for code, n in self.langs.items()]),
            "folder": _top([(f, under[f], f'in:"{f}"') for f in named]),
            "year": _top([(str(y), n, f"after:{y} before:{y + 1}") for y, n in self.years.items()]),
            "counted": self.counted,
        }


def count(searcher: tantivy.Searcher, addresses: list[Any]) -> FacetCounts:
    """The facet counts of the matches at ``addresses`` (at most MAX_COUNTED of them are read)."""
    out = FacetCounts()
    # In the order they are stored: neighbours share the doc store's compressed blocks.
    for address in sorted(addresses[:MAX_COUNTED], key=lambda a: (a.segment_ord, a.doc)):
        out.count(searcher.doc(address).to_dict())
    return out


def _top(values: list[tuple[str, int, str]]) -> list[FacetValue]:
    values.sort(key=lambda v: (-v[1], v[0]))
    return [{"value": v, "count": n, "filter": f} for v, n, f in values[:MAX_VALUES]]


def _folder(folder: str) -> str:
    """A match's folder as the index's ``folder`` facet holds it (index/fulltext.py): absolute,
    "/" for a file at the root."""
    folder = folder.rstrip("/")
    return folder if folder.startswith("/") else "/" + folder


def _ancestors(folder: str) -> list[str]:
    """``folder`` and every folder above it ("/a/b": "/a/b", "/a", "/"): ``in:`` finds a match in
    any of them."""
    out = [folder]
    while folder != "/":
        folder = os.path.dirname(folder)
        out.append(folder)
    return out


_FIRST_YEAR = 1970
# When each year from 1970 to 2100 starts in local time, as after:YEAR reads it: a year by bisect,
# several times faster than datetime.fromtimestamp for each match.
_YEAR_STARTS = [int(dt.datetime(y, 1, 1).timestamp()) for y in range(_FIRST_YEAR, 2101)]


def _year(mtime: int) -> int | None:
    """The local year of ``mtime``; None where after:/before: cannot name the year after it."""
    if _YEAR_STARTS[0] <= mtime < _YEAR_STARTS[-1]:
        return _FIRST_YEAR + bisect.bisect_right(_YEAR_STARTS, mtime) - 1
    try:
        year = dt.datetime.fromtimestamp(mtime).year
    except (OverflowError, ValueError, OSError):
        return None
    return year if 1 <= year < 9999 else None
