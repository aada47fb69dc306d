"""What ``deskdex search`` and ``deskdex dups`` print: title, path, date, size and a snippet with the
matches highlighted. Works on results as the protocol carries them (``{"total", "hits": [...]}``,
deskdex.protocol.SearchResults), whether they came over the socket or from the index directly.

Light on purpose (no json, no dataclasses, no typing at run time): the fast path renders with it.
"""

from __future__ import annotations

import os
import sys
import time

from deskdex import protocol

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping

    from deskdex.protocol import SearchResults

BOLD, DIM, CYAN, YELLOW, RESET = "\033[1m", "\033[2m", "\033[36m", "\033[33m", "\033[0m"


def color() -> bool:
    """Colour and links: on a terminal, unless NO_COLOR asks for none (no-color.org)."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def render_results(results: SearchResults, *, as_json: bool = False, paths: bool = False,
                   color: bool = False) -> str:
    """JSON, one file path a line, or the listing (with colour and links on a terminal)."""
    if as_json:
        return protocol.dumps(results, ascii_only=False, spaced=True) + "\n"
    if paths:
        return "".join(h["path"] + "\n" for h in results["hits"] if h.get("source", "files") == "files")
    return render_hits(results, color=color, links=color)


def render_hits(results: SearchResults, color: bool, links: bool = False) -> str:
    hits = results["hits"]
    if not hits:
        return "no results\n"
    out = []
    for n, h in enumerate(hits, 1):
        date = time.strftime("%Y-%m-%d", time.localtime(h["mtime"])) if h.get("mtime") else ""
        where = shown_location(h)
        title = h.get("title") or where
        shown = hyperlink(h["uri"], where) if links else where
        if color:
            out.append(f"{BOLD}{n}. {title}{RESET}\n   {CYAN}{shown}{RESET}  {DIM}{date}  {human(h['size'])}{RESET}\n")
        else:
            out.append(f"{n}. {title}\n   {where}  {date}  {human(h['size'])}\n")
        if h.get("snippet"):
            out.append("   " + highlight(h["snippet"], h.get("highlights") or [], color) + "\n")
    out.append(f"{len(hits)} of {results['total']} results\n")
    return "".join(out)


def shown_location(hit: Mapping[str, object]) -> str:
    """The path of a file; the URI of an archive member or a web page (of a search hit, or of a
    document of a duplicate cluster: anything with uri, path and perhaps source)."""
    uri = str(hit["uri"])
    return uri if "#" in uri or hit.get("source") == "web" else str(hit["path"])


def hyperlink(uri: str, text: str) -> str:
    """OSC 8: a clickable link in terminals that support it, plain text in the others."""
    return f"\033]8;;{uri.split('#', 1)[0]}\033\\{text}\033]8;;\033\\"


def highlight(snippet: str, spans: list[list[int]], color: bool) -> str:
    parts, last = [], 0
    for a, b in spans:
        parts.append(snippet[last:a])
        parts.append(f"{YELLOW}{BOLD}{snippet[a:b]}{RESET}" if color else f"[{snippet[a:b]}]")
        last = b
    parts.append(snippet[last:])
    return " ".join("".join(parts).split())


def human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return str(n)
