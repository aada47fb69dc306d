"""Search results for a terminal: title, path, date, size and a snippet with the matches highlighted."""

from __future__ import annotations

import time

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Hit:
    """A search hit as the daemon sends it (index.search.Hit without importing the index)."""

    uri: str
    path: str
    title: str
    snippet: str
    score: float
    mime: str
    mtime: int
    size: int
    ext: str = ""
    source: str = "files"
    cluster: int = 0
    highlights: list[tuple[int, int]] | None = None
    duplicates: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Results:
    total: int
    hits: list[Any]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Results":
        names = set(Hit.__dataclass_fields__) - {"extra"}
        hits = [Hit(**{k: v for k, v in h.items() if k in names},
                    extra={k: v for k, v in h.items() if k not in names}) for h in data["hits"]]
        return cls(total=data["total"], hits=hits)

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {"total": self.total, "hits": [{**{k: v for k, v in asdict(h).items() if k != "extra"}, **h.extra}
                                              if isinstance(h, Hit) else h.to_json() for h in self.hits]}

BOLD, DIM, CYAN, YELLOW, RESET = "\033[1m", "\033[2m", "\033[36m", "\033[33m", "\033[0m"


def render_results(results: Any, *, as_json: bool = False, paths: bool = False, color: bool = False) -> str:
    """What `deskdex search` prints, whether the client or the daemon renders it (daemon/launch.py):
    JSON, one file path a line, or the listing (with colour and links on a terminal)."""
    if as_json:
        import json

        return json.dumps(results.to_json(), ensure_ascii=False) + "\n"
    if paths:
        return "".join(h.path + "\n" for h in results.hits if h.source == "files")
    return render_hits(results, color=color, links=color)


def render_hits(results: Results, color: bool, links: bool = False) -> str:
    if not results.hits:
        return "no results\n"
    out = []
    for n, h in enumerate(results.hits, 1):
        date = time.strftime("%Y-%m-%d", time.localtime(h.mtime)) if h.mtime else ""
        where = h.uri if "#" in h.uri or h.source == "web" else h.path
        title = h.title or where
        shown = hyperlink(h.uri, where) if links else where
        if color:
            out.append(f"{BOLD}{n}. {title}{RESET}\n   {CYAN}{shown}{RESET}  {DIM}{date}  {human(h.size)}{RESET}\n")
        else:
            out.append(f"{n}. {title}\n   {where}  {date}  {human(h.size)}\n")
        if h.snippet:
            out.append("   " + highlight(h.snippet, h.highlights or [], color) + "\n")
    shown = f"{len(results.hits)} of {results.total}"
    out.append(f"{shown} results\n")
    return "".join(out)


def hyperlink(uri: str, text: str) -> str:
    """OSC 8: a clickable link in terminals that support it, plain text in the others."""
    return f"\033]8;;{uri.split('#', 1)[0]}\033\\{text}\033]8;;\033\\"


def highlight(snippet: str, spans: list[tuple[int, int]], color: bool) -> str:
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
