"""Plain-text helpers for PDF: paragraphs from extracted lines, PDF dates as ISO 8601."""

from __future__ import annotations

import re

META_KEYS = {"Title": "title", "Author": "author", "Subject": "subject", "Keywords": "keywords",
             "Creator": "creator", "Producer": "producer", "CreationDate": "created", "ModDate": "modified"}

_DATE = re.compile(r"^(?:D:)?(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?\s*(?:([Zz+-])(\d{2})?'?(\d{2})?'?)?")
_END = ".!?:;\"'”’)»。！？"
_BULLET = re.compile(r"^(?:[•◦▪‣·\-–*]|\(?\d{1,3}[.)]|[a-z][.)])\s")
_SOFT = ("\x02", "\xad", "\ufffe")


def pdf_date(value: str) -> str:
    """``D:20230204115901-05'00'`` as ``2023-02-04T11:59:01-05:00``; other text unchanged."""
    m = _DATE.match(value.strip())
    if not m:
        return value
    y, mo, d, h, mi, s, sign, th, tm = m.groups()
    out = f"{y}-{mo or '01'}-{d or '01'}"
    if h:
        out += f"T{h}:{mi or '00'}:{s or '00'}"
        if sign in ("Z", "z"):
            out += "+00:00"
        elif sign:
            out += f"{sign}{th or '00'}:{tm or '00'}"
    return out


def _cjk(ch: str) -> bool:
    return ord(ch) >= 0x2E80


def paragraphs(lines: list[str]) -> list[str]:
    """Join text lines into paragraphs.

    Text extractors give one line per printed line and rarely a blank line between
    paragraphs, so a paragraph also ends after a line that is clearly shorter than the
    page's usual line and ends a sentence, and before a line that starts a list item.
    """
    widths = sorted(len(ln) for ln in lines if ln)
    if not widths:
        return []
    usual = widths[int(0.8 * (len(widths) - 1))]
    out: list[str] = []
    cur = ""
    for ln in lines:
        if not ln:
            if cur:
                out.append(cur)
            cur = ""
            continue
        if cur and _BULLET.match(ln):
            out.append(cur)
            cur = ""
        cur = _join(cur, ln)
        if len(ln) < 0.7 * usual and ln[-1] in _END:
            out.append(cur)
            cur = ""
    if cur:
        out.append(cur)
    return [" ".join(p.split()) for p in out]


def _join(cur: str, ln: str) -> str:
    if not cur:
        return ln
    if cur.endswith(_SOFT):  # a hyphen the layout added: the word goes on
        return cur[:-1] + ln
    if cur.endswith("-") or (_cjk(cur[-1]) and _cjk(ln[0])):
        return cur + ln
    return cur + " " + ln
