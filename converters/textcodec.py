"""Bytes to Unicode with the encoding detected, not assumed (BOM, strict UTF-8, then charset-normalizer)."""

from __future__ import annotations

import codecs

from charset_normalizer import CharsetMatch, CharsetMatches, from_bytes


_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def decode(data: bytes, declared: str | None = None) -> tuple[str, str]:
    """Return (text, encoding). ``declared`` (from HTTP or a meta tag) is tried after a BOM."""
    for bom, enc in _BOMS:
        if data.startswith(bom):
            return data.decode(enc, errors="replace"), enc
    if declared:
        try:
            return data.decode(declared), declared.lower()
        except (LookupError, UnicodeDecodeError):
            pass
    if b"\x1b$" in data[:4096]:  # ISO-2022 escape sequences: 7-bit, so also valid UTF-8
        for enc in ("iso2022_kr", "iso2022_jp_2"):
            try:
                return data.decode(enc), enc
            except UnicodeDecodeError:
                continue
    wide = _wide_unicode(data[:4096])  # before UTF-8, which NUL bytes do not contradict
    if wide:
        return data.decode(wide, errors="replace"), wide
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    # Detection on a bounded sample keeps big files cheap; the whole file is decoded after.
    matches = from_bytes(data[:262144])
    best = matches.best()
    if best is None:
        for enc in _EAST_ASIAN:
            try:
                return data.decode(enc), enc
            except UnicodeDecodeError:
                continue
        # Nothing fits exactly: keep what reads as UTF-8 (the ASCII words at least), so the
        # file stays findable; the encoding says so.
        return data.decode("utf-8", errors="replace"), "unknown"
    encoding = _western_default(matches, best) or best.encoding
    return data.decode(encoding, errors="replace"), encoding


# Tried in order when the detector has no answer: multi-byte encodings it misses on short texts.
_EAST_ASIAN = ("euc_kr", "cp949", "johab", "big5hkscs", "euc_jis_2004", "cp932", "shift_jis_2004", "gb18030")


def _wide_unicode(head: bytes) -> str | None:
    """UTF-32 or UTF-16 without a byte order mark, told by where the NUL bytes fall."""
    n = len(head) - len(head) % 4
    # Each test below needs NULs in over 90 % of its units, two a quad or one a pair: over 45 % of
    # the bytes. Most text has none, and this count is the only pass over it then.
    if n < 16 or head.count(0, 0, n) <= 0.45 * n:
        return None
    quads = [head[i:i + 4] for i in range(0, n, 4)]
    if sum(q[1:] == b"\0\0\0" or (q[2:] == b"\0\0" and q[1] != 0) for q in quads) > 0.9 * len(quads):
        return "utf-32-le"
    if sum(q[:3] == b"\0\0\0" or (q[:2] == b"\0\0" and q[2] != 0) for q in quads) > 0.9 * len(quads):
        return "utf-32-be"
    pairs = n // 2
    if head[1:n:2].count(0) > 0.9 * pairs:
        return "utf-16-le"
    if head[0:n:2].count(0) > 0.9 * pairs:
        return "utf-16-be"
    return None


def _western_default(matches: CharsetMatches, best: CharsetMatch) -> str | None:
    """cp1252 when it reads the bytes about as well as the best Latin-script guess.

    Single-byte Latin code pages share most letters; on short texts the detector's pick among
    them (cp1257, cp1250, iso8859_10...) is close to chance, while cp1252 is by far the most
    likely source, as browsers assume for the same reason.
    """
    if best.encoding == "cp1252" or not all("Latin" in a or "Punctuation" in a for a in best.alphabets):
        return None
    for m in matches:
        if m.encoding == "cp1252" and m.chaos <= best.chaos + 0.1:
            return "cp1252"
    return None
