"""Archives and bundles: ZIP, TAR (plain or compressed), single gzip/bzip2/xz files, WARC, TREC.

A single compressed file (``notes.txt.gz``, ``ls.1.gz``) is no container: it is one document,
the file it holds, converted as that file under the compressed file's URI. A container yields
a parent Document, then each member as a ``Member`` whose URI points inside the
parent (``a.zip#dir/b.pdf``). Nothing is ever written to disk and no link is followed:
members are read into memory under ``Limits.member_bytes`` and an expansion ratio, and the
whole container under a budget (``expansion_ratio`` times its own size), so a zip or gzip
bomb stops after a bounded amount of work. Names are sanitised (no ``..``, no absolute
paths, valid UTF-8); symlinks, hard links and devices are skipped. A member over a limit is
recorded as that member's error; the rest of the container still converts.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import re
import stat
import tarfile
import zipfile
import zlib
from contextlib import contextmanager
from typing import IO, Callable, Iterator, Protocol

from .convert import current_limits
from .document import Document
from deskdex.errors import ConversionError, CorruptFile, HostileInput, SizeLimit
from .limits import Limits
from .registry import Member
from .source import Source
from .zipcheck import refuse_encrypted

_CHUNK = 1 << 20
# Below this size a high ratio is normal (a file of spaces); bombs only matter above it.
_RATIO_FLOOR = 1 << 20
_READ_ERRORS = (zipfile.BadZipFile, tarfile.TarError, zlib.error, lzma.LZMAError, EOFError, OSError,
                NotImplementedError, RuntimeError, ValueError)


class _Stream(Protocol):
    """What a member is read from: a file, a zip or tar member, a decompressing reader."""

    def read(self, size: int, /) -> bytes: ...


class _Budget:
    """Bytes one container may expand to, across all its members."""

    def __init__(self, compressed: int, limits: Limits) -> None:
        self.limits = limits
        self.left = max(limits.member_bytes, compressed * limits.expansion_ratio)

    def read(self, stream: _Stream, compressed: int | None = None) -> bytes:
        """Read a member, stopping at the member limit, its own ratio or the container budget."""
        cap = self.limits.member_bytes
        ratio_cap = compressed * self.limits.expansion_ratio if compressed else None
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = stream.read(_CHUNK)
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            self.left -= len(chunk)
            if total > cap:
                raise SizeLimit(f"expands to over {cap} bytes (member limit)")
            if ratio_cap is not None and total > max(ratio_cap, _RATIO_FLOOR):
                raise HostileInput(f"expands over {self.limits.expansion_ratio} times its compressed "
                                   f"size of {compressed} bytes (compression bomb)")
            if self.left < 0:
                raise HostileInput("the container expands far beyond its own size (compression bomb)")
            chunks.append(chunk)


def safe_name(raw: str, n: int) -> str:
    """A member name fit for a URI: valid UTF-8, no ``..``, no absolute path or drive."""
    name = raw.encode("utf-8", "surrogateescape").decode("utf-8", "replace").replace("\\", "/")
    parts = [p for p in name.split("/") if p not in ("", ".", "..")]
    if parts and re.fullmatch(r"[A-Za-z]:", parts[0]):
        parts = parts[1:]
    cleaned = "/".join(re.sub(r"[\x00-\x1f]", "_", p) for p in parts)
    return cleaned or f"member-{n}"


class _Names:
    """Sanitised names, made unique so two members never share a URI."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def __call__(self, raw: str, n: int) -> str:
        return self.unique(safe_name(raw, n))

    def unique(self, base: str) -> str:
        """``base``, or ``base~2``, ``base~3``... when an earlier member took it."""
        name, k = base, 1
        while name in self.seen:
            k += 1
            name = f"{base}~{k}"
        self.seen.add(name)
        return name


@contextmanager
def _opened(source: Source) -> Iterator[IO[bytes]]:
    with source.open() as f:
        yield f


def _parent(source: Source, mime: str) -> Document:
    return Document(uri=source.uri, mime=mime, title=source.name)


def _member(source: Source, name: str, read: Callable[[], bytes], mime: str | None = None) -> Member:
    """Read a member with ``read()``; a read that fails becomes that member's error."""
    try:
        data = read()
    except ConversionError as exc:
        return Member(source.child(name, b""), error=exc)
    except _READ_ERRORS as exc:
        return Member(source.child(name, b""), error=CorruptFile(f"unreadable member: {type(exc).__name__}: {exc}"))
    return Member(source.child(name, data, mime=mime))


def zip_members(source: Source, mime: str) -> Iterator[Document | Member]:
    limits = current_limits()
    with _opened(source) as f:
        try:
            zf = zipfile.ZipFile(f)
            infos = zf.infolist()
        except (zipfile.BadZipFile, zlib.error, OSError, ValueError, EOFError) as exc:
            raise CorruptFile(f"not a readable ZIP: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise CorruptFile(f"ZIP member name is not the UTF-8 it claims: {exc}") from exc
        doc = _parent(source, mime)
        doc.meta["members"] = str(sum(1 for i in infos if not i.is_dir()))
        yield doc
        budget, names = _Budget(source.size(), limits), _Names()
        for n, info in enumerate(infos, 1):
            if info.is_dir() or stat.S_ISLNK(info.external_attr >> 16):
                continue  # a symlink is never followed
            name = names(info.filename, n)
            if info.file_size > limits.member_bytes:
                yield Member(source.child(name, b""), error=SizeLimit(
                    f"declares {info.file_size} bytes, over the member limit of {limits.member_bytes}"))
                continue

            def read(info: zipfile.ZipInfo = info) -> bytes:
                refuse_encrypted(info, "ZIP")
                with zf.open(info) as stream:
                    return budget.read(stream, info.compress_size)

            yield _member(source, name, read)
            if budget.left < 0:
                raise HostileInput("the container expands far beyond its own size (compression bomb)")


def tar_members(source: Source, mime: str) -> Iterator[Document | Member]:
    limits = current_limits()
    with _opened(source) as f:
        try:
            # A stream ("r|*"): members in order, no seeking back through a compressed file.
            tf = tarfile.open(fileobj=f, mode="r|*", errors="surrogateescape")
        except (tarfile.TarError, OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
            raise CorruptFile(f"not a readable TAR: {exc}") from exc
        yield _parent(source, mime)
        budget, names = _Budget(source.size(), limits), _Names()
        n = 0
        try:
            for info in tf:
                n += 1
                if not info.isreg():
                    continue  # directories, symlinks, hard links and devices are not documents
                name = names(info.name, n)
                if info.size > limits.member_bytes:
                    budget.left -= info.size  # skipping it still costs the decompression
                    yield Member(source.child(name, b""), error=SizeLimit(
                        f"declares {info.size} bytes, over the member limit of {limits.member_bytes}"))
                    if budget.left < 0:
                        raise HostileInput("the archive expands far beyond its own size (compression bomb)")
                    continue
                stream = tf.extractfile(info)
                yield _member(source, name, lambda: budget.read(stream) if stream else b"")  # noqa: B023 (called at once)
                if budget.left < 0:
                    raise HostileInput("the archive expands far beyond its own size (compression bomb)")
        except (tarfile.TarError, OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
            raise CorruptFile(f"TAR broken after {n} members: {exc}") from exc


_OPENERS: dict[str, Callable[[IO[bytes]], io.BufferedIOBase]] = {
    "application/gzip": gzip.open, "application/x-gzip": gzip.open,
    "application/x-bzip2": bz2.open, "application/x-xz": lzma.open}
_SUFFIXES = re.compile(r"\.(gz|gzip|bz2|xz|z)$", re.I)


def compressed(source: Source, mime: str) -> Source:
    """A single compressed file is one document: the file it holds (``notes.txt.gz`` holds
    ``notes.txt``), decompressed under the member limit and expansion ratio, and handed back to
    be converted in its place, by its own converter, under the compressed file's URI."""
    limits = current_limits()
    opener = _OPENERS.get(mime, gzip.open)
    inner = _SUFFIXES.sub("", source.name) if _SUFFIXES.search(source.name) else source.name
    budget = _Budget(source.size(), limits)
    with _opened(source) as f:
        try:
            with opener(f) as stream:
                data = budget.read(stream, source.size())
        except _READ_ERRORS as exc:
            raise CorruptFile(f"not readable {mime}: {type(exc).__name__}: {exc}") from exc
    return Source(uri=source.uri, name=safe_name(inner, 1).rsplit("/", 1)[-1], data=data,
                  depth=source.depth + 1)


def warc_members(source: Source, mime: str) -> Iterator[Document | Member]:
    """Each response record of a WARC (or WARC.gz) file, keyed by its target URL."""
    limits = current_limits()
    from warcio.archiveiterator import ArchiveIterator
    from warcio.exceptions import ArchiveLoadFailed

    yield _parent(source, mime)
    budget, names = _Budget(source.size(), limits), _Names()
    with _opened(source) as f:
        try:
            for n, record in enumerate(ArchiveIterator(f), 1):
                if record.rec_type not in ("response", "resource"):
                    continue
                url = record.rec_headers.get_header("WARC-Target-URI") or f"record-{n}"
                ctype = record.http_headers.get_header("Content-Type") if record.http_headers else None
                ctype = ctype.split(";")[0].strip().lower() if ctype else record.content_type
                stream = record.content_stream()
                yield _member(source, names(url, n) if "://" not in url else _unique_url(names, url),
                              lambda: budget.read(stream), ctype)  # noqa: B023 (called at once)
                if budget.left < 0:
                    raise HostileInput("the WARC expands far beyond its own size (compression bomb)")
        except (ArchiveLoadFailed, ValueError, OSError, EOFError, zlib.error) as exc:
            raise CorruptFile(f"not a readable WARC: {type(exc).__name__}: {exc}") from exc


def _unique_url(names: _Names, url: str) -> str:
    """A URL is its own key (no sanitising: ``..`` in a URL names nothing on disk)."""
    return names.unique(url)


_TREC_DOC = re.compile(rb"<DOC>(.*?)</DOC>", re.S)
_DOCNO = re.compile(rb"<DOCNO>\s*(.*?)\s*</DOCNO>", re.S)
_DOCHDR = re.compile(rb"<DOCHDR>(.*?)</DOCHDR>", re.S)


def trec_members(source: Source, mime: str) -> Iterator[Document | Member]:
    """TREC (Web) format: each ``<DOC>`` a member named by its ``<DOCNO>``."""
    limits = current_limits()
    data = source.read(limits.file_bytes)
    if b"<DOC>" not in data[:65536]:
        raise CorruptFile("not a TREC file: no <DOC>")
    doc = _parent(source, mime)
    yield doc
    names = _Names()
    count = 0
    for count, m in enumerate(_TREC_DOC.finditer(data), 1):
        body = m.group(1)
        docno = _DOCNO.search(body)
        name = names(docno.group(1).decode("utf-8", "replace") if docno else "", count)
        hdr = _DOCHDR.search(body)
        # TREC Web: the page after the HTTP header block; older TREC: the rest after the DOCNO.
        content = body[hdr.end():] if hdr else body[docno.end():] if docno else body
        if len(content) > limits.member_bytes:
            yield Member(source.child(name, b""), error=SizeLimit(f"{len(content)} bytes, over the member limit"))
            continue
        yield Member(source.child(name, content.strip(), mime="text/html"))
    doc.meta["members"] = str(count)
