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
    matches = from_bytes(data[:262144])
    best = matches.best()
    if best is None:
        raise CorruptFile("no text encoding fits these bytes (binary data?)")
    encoding = _western_default(matches, best) or best.encoding
    return data.decode(encoding, errors="replace"), encoding


def _western_default(matches: object, best: object) -> str | None:
    """cp1252 when it reads the bytes about as well as the best Latin-script guess.

    Single-byte Latin code pages share most letters; on short texts the detector's pick among
    them (cp1257, cp1250, iso8859_10...) is close to chance, while cp1252 is by far the most
    likely source, as browsers assume for the same reason.
    """
    if best.encoding == "cp1252" or not all(  # type: ignore[attr-defined]
            "Latin" in a or "Punctuation" in a for a in best.alphabets):  # type: ignore[attr-defined]
        return None
    for m in matches:  # type: ignore[attr-defined]
        if m.encoding == "cp1252" and m.chaos <= best.chaos + 0.1:  # type: ignore[attr-defined]
            return "cp1252"
    return None
