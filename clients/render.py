"""What ``deskdex search`` and ``deskdex dups`` print: title, path, date, size and a snippet with the
matches highlighted. Works on results as the protocol carries them (``{"total", "hits": [...]}``,
deskdex.protocol.SearchResults), whether they came over the socket or from the index directly.

What people read is made safe for a terminal first (``terminal_safe``): a file name or title is
anyone's to choose, and an escape sequence in one could retitle the window, rewrite the screen or
make a name look like another. JSON keeps every name exact, and ``--paths`` to a pipe prints the
names' exact bytes, one a line, or NUL-terminated with ``-0`` for ``xargs -0``.

Light on purpose (no json, no dataclasses, no typing, no re at run time): the fast path renders with it.
"""

from __future__ import annotations

import os
import sys
import time

from deskdex import protocol
from deskdex.sizes import human

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping

    from deskdex.protocol import Indexing, SearchHit, SearchResults

BOLD, DIM, CYAN, YELLOW, RESET = "\033[1m", "\033[2m", "\033[36m", "\033[33m", "\033[0m"
# Above the hits found by meaning alone (``related``): documents that hold none of the query's
# words, ranked after every one that does (the CLI's and the tray's words).
RELATED = "Related by meaning (without these words):"


def _escaped(code: int) -> str:
    named = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}
    return named.get(code) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


# What a terminal acts on instead of showing: the C0 controls (ESC opens every sequence; a newline
# breaks a listing), DEL, the C1 controls (U+009B alone is a CSI), and the bidirectional controls
# and separators that reorder or break the line after them (U+202E makes "a\u202egpj.exe" read as
# "aexe.jpg").
_UNSAFE = {c: _escaped(c) for c in (*range(0x20), *range(0x7F, 0xA0), 0x061C, 0x200E, 0x200F,
                                    *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029)}
_UNSAFE_BUT_LINES = {c: e for c, e in _UNSAFE.items() if c not in (0x09, 0x0A)}


def terminal_safe(text: str, lines: bool = False) -> str:
    """``text`` as it may be printed for people to read: every character a terminal would act on
    rather than show is written out as an escape (``\\x1b``, ``\\n``, ``\\u202e``). ``lines``: keep
    newlines and tabs (a document's text)."""
    return text.translate(_UNSAFE_BUT_LINES if lines else _UNSAFE)


def color() -> bool:
    """Colour and links: on a terminal, unless NO_COLOR asks for none (no-color.org)."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def print_results(results: SearchResults, *, as_json: bool = False, paths: bool = False,
                  null: bool = False, folded: bool = True) -> None:
    """Print a search on stdout as ``deskdex search`` does: JSON; with ``paths``, each file's exact
    name for another program (one a line, or NUL-terminated with ``null``) or, on a terminal, one a
    line made safe to read; else the listing (with colour and links on a terminal). ``folded``: each
    hit stands for its copies (else, as with ``--all``, every copy is a hit of its own)."""
    out = sys.stdout
    if paths and (null or not out.isatty()):
        out.flush()
        out.buffer.write(raw_paths(results, b"\0" if null else b"\n"))
        out.buffer.flush()
        return
    out.write(render_results(results, as_json=as_json, paths=paths, color=color(), folded=folded))


def render_results(results: SearchResults, *, as_json: bool = False, paths: bool = False,
                   color: bool = False, folded: bool = True) -> str:
    """JSON (names exact), or for people: one file path a line, or the listing (with colour and
    links on a terminal)."""
    if as_json:
        return protocol.dumps(results, ascii_only=False, spaced=True) + "\n"
    if paths:
        return "".join(terminal_safe(h["path"]) + "\n" for h in _files(results))
    return render_hits(results, color=color, links=color, folded=folded)


def _files(results: SearchResults) -> list[SearchHit]:
    """The hits that are files (or in one), not web pages: what --paths prints."""
    return [h for h in results["hits"] if h.get("source", "files") == "files"]


def raw_paths(results: SearchResults, end: bytes) -> bytes:
    """The exact names of the files among the hits, each followed by ``end``."""
    return b"".join(raw_path(h) + end for h in _files(results))


def raw_path(hit: Mapping[str, object]) -> bytes:
    """The bytes of a hit's file name as the file system has them. A name that is not UTF-8 is
    shown with U+FFFD in ``path``; its ``file://`` URI keeps the bytes, percent-encoded."""
    path, uri = str(hit["path"]), str(hit["uri"])
    if "\ufffd" in path and uri.startswith("file://"):
        from urllib.parse import unquote_to_bytes  # rare: the fast path does not load it otherwise

        return unquote_to_bytes(uri[len("file://"):].split("#", 1)[0])
    return os.fsencode(path)


def render_hits(results: SearchResults, color: bool, links: bool = False, folded: bool = True) -> str:
    hits = results["hits"]
    if not hits:
        return count_line(0, 0, 0, False, results.get("indexing")) + "\n"
    out = []
    for n, h in enumerate(hits, 1):
        if h.get("related") and (n == 1 or not hits[n - 2].get("related")):
            out.append(f"{BOLD}{RELATED}{RESET}\n" if color else RELATED + "\n")
        date = time.strftime("%Y-%m-%d", time.localtime(h["mtime"])) if h.get("mtime") else ""
        where = terminal_safe(shown_location(h))
        title = terminal_safe(h.get("title") or "") or where
        shown = hyperlink(h["uri"], where) if links else where
        more = duplicates(h.get("duplicates") or 0, h.get("similar") or 0)
        if color:
            out.append(f"{BOLD}{n}. {title}{RESET}\n   {CYAN}{shown}{RESET}  {DIM}{date}  {human(h['size'])}"
                       f"{more}{RESET}\n")
        else:
            out.append(f"{n}. {title}\n   {where}  {date}  {human(h['size'])}{more}\n")
        if h.get("snippet"):
            out.append("   " + highlight(h["snippet"], h.get("highlights") or [], color) + "\n")
    # Listed one a row (--all), the copies are among the hits: none is folded into another.
    copies = sum(h.get("duplicates") or 0 for h in hits) if folded else 0
    # Copies folded into a hit are counted apart: "5 of 6 results" above five rows read as if one were missing.
    beyond = results["total"] > len(hits) + copies  # more than listed: --limit, --offset
    out.append(count_line(len(hits), copies, results["total"], beyond, results.get("indexing"),
                          sum(1 for h in hits if h.get("related")), results.get("related", 0)) + "\n")
    return "".join(out)


def count_line(rows: int, copies: int, total: int, more: bool, indexing: Indexing | None = None,
               related: int = 0, related_total: int = 0) -> str:
    """What ``deskdex search`` (under its hits) and the tray's window (above them) say of ``rows``
    results listed, which stand for ``copies`` copies besides, of ``total`` matching documents (copies
    included); ``more``: more results are to come; ``indexing``: the search answer's, from a daemon
    still indexing: "no results" alone would read as "not there", and more may match once it is done.
    ``related``: how many of the rows meaning alone found (they hold none of the words), and
    ``related_total`` how many of ``total``: said apart, so that "5 results" or "5 matching documents"
    never counts documents without the words searched."""
    busy = protocol.indexing_said(indexing) if indexing else ""
    if not rows:
        return f"no results yet: {busy}; more may match when it is done" if busy else "no results"
    folded = f" (+{copies:,} cop{'y' if copies == 1 else 'ies'})" if copies else ""
    worded = rows - related
    if more:
        line = f"first {rows:,} results{folded} of {total - related_total:,} matching documents"
        related = related_total
    elif not worded:
        line = "no results"
    else:
        line = f"{worded:,} result{'s' if worded != 1 else ''}{folded}"
    if related:
        line += f"; {related:,} related by meaning" if worded or more else f", {related:,} related by meaning"
    return f"{line} ({busy}; more may match when it is done)" if busy else line


def duplicates(n: int, similar: int = 0) -> str:
    """What a hit of a duplicate cluster adds to its line: how many copies it stands for (``--all``
    shows them) and how many similar documents its cluster holds besides (``--similar URI``
    lists them all)."""
    counts = cluster_counts(n, similar)
    return "  " + counts if counts else ""


def cluster_counts(n: int, similar: int = 0) -> str:
    """``"2 duplicates, 1 similar"``, the parts that are not zero: the CLI's and the tray's words."""
    return ", ".join(([f"{n} duplicate{'s' if n > 1 else ''}"] if n > 0 else []) + ([f"{similar} similar"] if similar > 0 else []))


def shown_location(hit: Mapping[str, object]) -> str:
    """The path of a file; the URI of an archive member or a web page (of a search hit, or of a
    document of a duplicate cluster: anything with uri, path and perhaps source)."""
    uri = str(hit["uri"])
    return uri if "#" in uri or hit.get("source") == "web" else str(hit["path"])


def hyperlink(uri: str, text: str) -> str:
    """OSC 8: a clickable link in terminals that support it, plain text in the others. ``text``
    is already safe; a URI that is not (a web page's may hold anything) cannot end the sequence."""
    return f"\033]8;;{terminal_safe(uri.split('#', 1)[0])}\033\\{text}\033]8;;\033\\"


def highlight(snippet: str, spans: list[list[int]], color: bool) -> str:
    """The snippet on one line (runs of white space as one space), its matches marked, safe to print."""
    parts, last = [], 0
    for a, b in spans:
        parts.append(_one_line(snippet[last:a]))
        match = _one_line(snippet[a:b])
        parts.append(f"{YELLOW}{BOLD}{match}{RESET}" if color else f"[{match}]")
        last = b
    parts.append(_one_line(snippet[last:]))
    return "".join(parts).strip()


def _one_line(text: str) -> str:
    """``text`` with each run of white space as one space (kept at either end: a span may begin or
    end mid-sentence), then made safe for a terminal."""
    words = text.split()
    if not words:
        return " " if text else ""
    squashed = (" " if text[0].isspace() else "") + " ".join(words) + (" " if text[-1].isspace() else "")
    return terminal_safe(squashed)
