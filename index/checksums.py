"""Checksums: of the raw bytes (skip work on unchanged or moved files) and of the normalised text
(the same text in another format). BLAKE2b, 128 bits: fast in the standard library and with no
practical collisions, unlike the CRC the lecture notes start from."""

from __future__ import annotations

import hashlib
import re
import threading
import unicodedata
from typing import BinaryIO, Iterable

from deskdex.converters import open_regular
from deskdex.errors import Interrupted, SizeLimit, UnreadableFile

_WORD = re.compile(r"\w+")


def raw_checksum(path: str, limit: int | None = None, stop: threading.Event | None = None) -> str:
    """BLAKE2b of a regular file's bytes (see ``raw_checksum_of``). Raises UnreadableFile
    (NotRegular for a FIFO, socket or device) rather than blocking."""
    with open_regular(path) as f:
        return raw_checksum_of(f, limit, stop)


def raw_checksum_of(f: BinaryIO, limit: int | None = None, stop: threading.Event | None = None,
                    chunk: int = 1 << 20) -> str:
    """The raw checksum of an open file (from where it is to its end), reading at most ``limit``
    bytes (a file that grew past it since it was listed raises SizeLimit) and giving up with
    Interrupted as soon as ``stop`` is set: this runs on the daemon's one writer, which must stay
    answerable to SIGTERM."""
    h = hashlib.blake2b(digest_size=16)
    read = 0
    while True:
        if stop is not None and stop.is_set():
            raise Interrupted("stopped while reading a file")
        try:
            block = f.read(chunk)
        except OSError as exc:
            raise UnreadableFile(f"{exc.strerror or exc} while reading") from exc
        if not block:
            break
        read += len(block)
        if limit is not None and read > limit:
            raise SizeLimit(f"grew past the file size limit of {limit} bytes while being read")
        h.update(block)
    return h.hexdigest()


SAMPLE = 1 << 20


def sampled_checksum_of(f: BinaryIO, size: int) -> str:
    """For a file over the size limit that is converted by its headers alone (a film): BLAKE2b of its
    size and its first and last MiB, marked with "~" so that it never equals a full checksum. Two
    such files that agree are taken for the same (moved, copied): a film edited in its middle only,
    keeping its size, would pass for unchanged until its mtime moves, which any edit does."""
    h = hashlib.blake2b(digest_size=16)
    h.update(size.to_bytes(8, "little"))
    try:
        h.update(f.read(SAMPLE))
        if size > 2 * SAMPLE:
            f.seek(size - SAMPLE)
            h.update(f.read(SAMPLE))
    except OSError as exc:
        raise UnreadableFile(f"{exc.strerror or exc} while reading") from exc
    return "~" + h.hexdigest()


def bytes_checksum(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def words(text: str) -> list[str]:
    """The words of ``text`` as the checksums see them: NFKC, case-folded, ``\\w+``."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    if folded.isascii():
        # The same words, a third faster than the regex: bytes.translate turns every byte that
        # is not an ASCII word character into a space in one C loop. Most text is ASCII, and
        # every converted document's text passes here (duplicate features, checksum).
        return folded.encode("ascii").translate(_ASCII_WORDS).decode("ascii").split()
    return _WORD.findall(folded)


_ASCII_WORDS = bytes(b if chr(b).isascii() and (chr(b).isalnum() or b == 0x5F) else 0x20 for b in range(256))


def normalise(text: str) -> str:
    """Text reduced to its words: NFKC, case-folded, one space between words."""
    return " ".join(words(text))


CHUNK_CHARS = 1_000_000  # text read at a time by words_checksum


def words_checksum(texts: Iterable[str]) -> str | None:
    """``bytes_checksum`` of the words of ``texts`` joined by spaces (``normalise``), read a piece
    at a time so a long text never becomes one list of words; None when there are no words. A
    piece ends after a space or newline, where no word, and no Unicode normalisation, spans.
    ``texts`` may be a generator: one long text's pieces, made as they are read."""
    h = hashlib.blake2b(digest_size=16)
    sep = b""
    for text in texts:
        start = 0
        while start < len(text):
            end = start + CHUNK_CHARS
            if end < len(text):
                cut = max(text.rfind(" ", start, end), text.rfind("\n", start, end))
                if cut < start:  # no space in a whole piece: on to the next one, wherever it is
                    ahead = [i for i in (text.find(" ", end), text.find("\n", end)) if i >= 0]
                    cut = min(ahead) if ahead else len(text) - 1
                end = cut + 1
            ws = words(text[start:end])
            if ws:
                h.update(sep + " ".join(ws).encode("utf-8"))
                sep = b" "
            start = end
    return h.hexdigest() if sep else None


def text_checksum(text: str) -> str:
    return bytes_checksum(normalise(text).encode("utf-8"))
