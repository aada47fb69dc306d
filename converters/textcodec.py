"""Bytes to Unicode with the encoding detected, not assumed (BOM, strict UTF-8, then charset-normalizer)."""

from __future__ import annotations

import codecs

from charset_normalizer import from_bytes

from .errors import CorruptFile

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
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    # Detection on a bounded sample keeps big files cheap; the whole file is decoded after.
    best = from_bytes(data[:262144]).best()
    if best is None:
        raise CorruptFile("no text encoding fits these bytes (binary data?)")
    return data.decode(best.encoding, errors="replace"), best.encoding
