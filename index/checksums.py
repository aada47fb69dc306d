"""Checksums: of the raw bytes (skip work on unchanged or moved files) and of the normalised text
(the same text in another format). BLAKE2b, 128 bits: fast in the standard library and with no
practical collisions, unlike the CRC the lecture notes start from."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import BinaryIO

_WORD = re.compile(r"\w+")


def raw_checksum(path: str, chunk: int = 1 << 20) -> str:
    with open(path, "rb") as f:
        return raw_checksum_of(f, chunk)


def raw_checksum_of(f: BinaryIO, chunk: int = 1 << 20) -> str:
    """The raw checksum of an open file (from where it is to its end)."""
    h = hashlib.blake2b(digest_size=16)
    while block := f.read(chunk):
        h.update(block)
    return h.hexdigest()


def bytes_checksum(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def normalise(text: str) -> str:
    """Text reduced to its words: NFKC, case-folded, one space between words."""
    return " ".join(_WORD.findall(unicodedata.normalize("NFKC", text).casefold()))


def text_checksum(text: str) -> str:
    return bytes_checksum(normalise(text).encode("utf-8"))
