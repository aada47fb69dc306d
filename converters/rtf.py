"""RTF with striprtf: paragraphs, headings (``\\outlinelevel``), list items, table cells, and ``\\info``.

striprtf turns RTF into plain text and drops every destination (fonts, pictures, ``\\info``).
Before it runs, the control words that carry structure are rewritten as private-use
characters it passes through (``{\\uc1\\uN?}``), so each line of its output still says
whether it was a heading, a list item or a table row. The ``\\info`` group is read on its
own: title, author, subject, keywords, dates; ``\\deflang`` gives the language.
"""

from __future__ import annotations

import locale
import logging
import re

from .document import Document
from deskdex.errors import CorruptFile
from .source import Source

logger = logging.getLogger(__name__)

_CELL, _LIST, _PARD, _INTBL = "\ue000", "\ue001", "\ue002", "\ue003"
_TITLE = "\ue01f"  # the paragraph is the document's displayed title (see _title_paragraph)
_HEAD0, _ILVL0 = 0xE010, 0xE004  # heading level n is chr(_HEAD0 + n), list level n chr(_ILVL0 + n)
_MARK = "{\\uc1\\u%d?}"
_CELL_WORD = re.compile(r"\\(?:nest)?cell(?![a-zA-Z])(?: ?)")
_LIST_WORD = re.compile(r"\\ls\d+(?![a-zA-Z0-9])(?: ?)")
_OUTLINE_WORD = re.compile(r"\\outlinelevel(\d)(?![0-9])(?: ?)")
_PARD_WORD = re.compile(r"\\pard(?![a-zA-Z])(?: ?)")
_ILVL_WORD = re.compile(r"\\ilvl(\d)(?![0-9])(?: ?)")
_INTBL_WORD = re.compile(r"\\intbl(?![a-zA-Z])(?: ?)")
# A paragraph's control words up to its first text, also through the groups Word wraps each run in.
_PARD_CONTROLS = re.compile(r"\\pard(?![a-zA-Z])((?:\s|\{|\\(?!pard?(?![a-z]))[a-z]+(?![a-z])-?\d*(?![0-9]))*)(?=[^\\{}\s])")
_SIZE_WORD = re.compile(r"\\fs(\d+)")
_TITLE_WITHIN = 1 << 18  # characters: a title paragraph follows the font and style tables, not pages of text
_MARKS = re.compile("([\ue000-\ue01f\n])")
_INFO_FIELD = re.compile(r"\{\\(title|author|subject|keywords|operator|company|doccomm)\b ?((?:[^{}\\]|\\.|\\[a-z]+-?\d* ?)*)\}")
_INFO_DATE = re.compile(r"\{\\(creatim|revtim)((?:\\[a-z]+\d+ ?)+)\}")
_DATE_PART = re.compile(r"\\(yr|mo|dy|hr|min)(\d+)")
_DEFLANG = re.compile(rb"\\deflang(\d+)")
_BULLET = re.compile(r"^[\s•·◦▪\-–*]+")
_INFO_KEYS = {"title": "title", "author": "author", "subject": "subject", "keywords": "keywords",
              "operator": "modified_by", "company": "company", "doccomm": "comments"}


def convert(source: Source, mime: str) -> Document:
    data = source.read()
    if not data.lstrip().startswith(b"{\\"):  # "{\\rtf1" normally; bare fragments also occur
        raise CorruptFile("not RTF (it does not start with a {\\ group)")
    # RTF is 7-bit text with \'xx escapes for other bytes; latin-1 keeps any raw byte as it was.
    raw = data.decode("latin-1")
    if not raw.lstrip().startswith("{\\rtf"):  # striprtf stops at the end of the first group
        raw = "{\\rtf1 " + raw + "}"
    doc = Document(uri=source.uri, mime=mime)
    doc.meta.update(_info(raw))
    m = _DEFLANG.search(data[:8192])
    if m and (lang := locale.windows_locale.get(int(m.group(1)))):
        doc.meta["language"] = lang.replace("_", "-")
    raw = _title_paragraph(raw)
    try:
        text = _to_text(_mark(raw))
    except ValueError:
        # striprtf's picture remover misreads some \\bin words; pictures hold no text anyway.
        try:
            text = _to_text(_mark(_drop_groups(raw, "{\\pict")))
        except (ValueError, LookupError, IndexError, OverflowError) as exc:
            raise CorruptFile(f"unreadable RTF: {type(exc).__name__}: {exc}") from exc
    except (LookupError, IndexError, OverflowError) as exc:
        raise CorruptFile(f"unreadable RTF: {type(exc).__name__}: {exc}") from exc
    shown = _fill(doc, text)
    doc.settle_title(doc.meta.pop("title", "") or shown, source.name)
    return doc


def _title_paragraph(raw: str) -> str:
    """``raw`` with the first paragraph that has text marked as the title when it looks like one:
    centred, and bold or set in 14 pt or more, and not a heading. Word's Title style and pandoc's
    title block are written so; without it the first heading became the title of a document whose
    title sits above it (pandoc's writer.rtf was "Headers", not "Pandoc Test Suite")."""
    m = _PARD_CONTROLS.search(raw, 0, _TITLE_WITHIN)
    if m is None:
        return raw
    words = m.group(1)
    sizes = [int(n) for n in _SIZE_WORD.findall(words)]
    if "\\qc" not in words or "\\outlinelevel" in words:
        return raw
    if not (re.search(r"\\b(?![a-z0-9])", words) or (sizes and max(sizes) >= 28)):
        return raw
    return raw[:m.end()] + _MARK % ord(_TITLE) + raw[m.end():]


def _mark(raw: str) -> str:
    # A list item's rendered number sits in its own group with a \\pard that would end the item.
    raw = _drop_groups(raw, "{\\listtext")
    raw = _PARD_WORD.sub(lambda _: _MARK % ord(_PARD), raw)
    raw = _INTBL_WORD.sub(lambda _: _MARK % ord(_INTBL), raw)
    raw = _CELL_WORD.sub(lambda _: _MARK % ord(_CELL), raw)
    raw = _LIST_WORD.sub(lambda _: _MARK % ord(_LIST), raw)
    raw = _ILVL_WORD.sub(lambda m: _MARK % (_ILVL0 + int(m.group(1))), raw)
    return _OUTLINE_WORD.sub(lambda m: _MARK % (_HEAD0 + int(m.group(1))), raw)


def _fill(doc: Document, text: str) -> str:
    """Blocks from striprtf's output, reading the markers as paragraph properties; returns the
    text of the paragraph marked as the title (``_title_paragraph``), if short enough for one.

    Paragraph properties hold until the next ``\\pard``, so the state carries across lines;
    inside a table (``\\intbl``) paragraphs gather into the cell until ``\\cell``.
    """
    title, in_title = "", False
    heading: int | None = None
    depth = 1
    in_list = in_table = False
    cell: list[str] = []
    cur: list[str] = []
    for piece in _MARKS.split(text):
        if piece == _PARD:
            heading, in_list, in_table, depth = None, False, False, 1
        elif piece == _TITLE:
            in_title = True
        elif piece == _INTBL:
            in_table = True
        elif piece == _LIST:
            in_list = True
        elif piece == _CELL:
            doc.add("td", _clean(" ".join(cell + cur)))
            cell, cur = [], []
        elif piece == "\n":
            line = _clean("".join(cur))
            cur = []
            if in_title and line:
                title = line if len(line) <= 200 else ""
                in_title = False
            if in_table:
                cell.append(line)
            elif heading is not None and heading < 9:  # level 9 is Word's "body text"
                doc.add("h", line, level=min(heading + 1, 6))
            elif in_list:
                doc.add("li", _BULLET.sub("", line), level=depth)
            else:
                doc.add("p", line)
        elif len(piece) == 1 and _ILVL0 <= ord(piece) < _ILVL0 + 10:
            depth = min(ord(piece) - _ILVL0 + 1, 6)
        elif len(piece) == 1 and _HEAD0 <= ord(piece) < _HEAD0 + 10:
            heading = ord(piece) - _HEAD0
        elif piece and not "\ue000" <= piece <= "\ue01f":
            cur.append(piece)
    text_left = _clean(" ".join(cell + cur))
    doc.add("p", text_left)
    return title


def _clean(s: str) -> str:
    s = "".join(c for c in s if not "\ue000" <= c <= "\ue01f")
    return " ".join(s.split())


def _to_text(rtf: str) -> str:
    """striprtf's plain text of ``rtf``, undecodable bytes replaced."""
    from striprtf.striprtf import rtf_to_text

    # striprtf ships py.typed but leaves rtf_to_text unannotated.
    text: str = rtf_to_text(rtf, errors="replace")  # type: ignore[no-untyped-call]
    return text


def _info(raw: str) -> dict[str, str]:
    start = raw.find("{\\info")
    if start < 0:
        return {}
    group = _group(raw, start)
    out: dict[str, str] = {}
    for m in _INFO_FIELD.finditer(group):
        try:
            value = _to_text("{\\rtf1 " + m.group(2) + "}")
        except (ValueError, LookupError, IndexError) as exc:
            logger.debug("unreadable \\info field %s: %s", m.group(1), exc)
            continue
        value = " ".join(value.split())
        if value:
            out[_INFO_KEYS[m.group(1)]] = value
    for m in _INFO_DATE.finditer(group):
        parts = {k: int(v) for k, v in _DATE_PART.findall(m.group(2))}
        if "yr" in parts:
            out["created" if m.group(1) == "creatim" else "modified"] = (
                f"{parts['yr']:04d}-{parts.get('mo', 1):02d}-{parts.get('dy', 1):02d}"
                f"T{parts.get('hr', 0):02d}:{parts.get('min', 0):02d}:00")
    return out


def _group(raw: str, start: int) -> str:
    """The text of the brace group opening at ``start`` (escaped braces skipped)."""
    depth, i, n = 0, start, min(len(raw), start + 1_000_000)
    while i < n:
        c = raw[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return raw[start:i + 1]
        i += 1
    return raw[start:n]


def _drop_groups(raw: str, opener: str) -> str:
    out, pos = [], 0
    while (start := raw.find(opener, pos)) >= 0:
        out.append(raw[pos:start])
        pos = start + len(_group(raw, start))
    out.append(raw[pos:])
    return "".join(out)
