"""A file's MIME type: by suffix first (as Recoll's mimemap), then by sniffing the first bytes.

The suffix wins when it names a format we convert; when it does not (or there is none), the
content decides. A converter handed bytes that are not its format says so (CorruptFile).
"""

from __future__ import annotations

import codecs
import mimetypes
import re

from .registry import Registry
from .source import Source

OCTET = "application/octet-stream"

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "application/pdf"),
    (b"\x1f\x8b", "application/gzip"),
    (b"BZh", "application/x-bzip2"),
    (b"\xfd7zXZ\x00", "application/x-xz"),
    (b"{\\rtf", "application/rtf"),
    (b"\x89PNG", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF8", "image/gif"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
    (b"ID3\x04\x00", "audio/mpeg"),  # ID3v2.4, 2.3 and 2.2 tags before MPEG audio
    (b"ID3\x03\x00", "audio/mpeg"),
    (b"ID3\x02\x00", "audio/mpeg"),
    (b"fLaC", "audio/flac"),
    (b"0&\xb2u\x8ef\xcf\x11", "video/x-ms-asf"),
    (b"WARC/", "application/warc"),
    (b"\x01\x01\x01\x01\n", "application/mbox"),  # an MMDF mailbox (mail.mbox reads both)
    (b"%!PS", "application/postscript"),
    (b"\xc5\xd0\xd3\xc6", "application/postscript"),  # DOS binary EPS
    (b"AT&TFORM", "image/vnd.djvu"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "application/x-ole-storage"),  # Office 97-2003, Outlook: ole.py
)
_HTML = re.compile(rb"^\s*(<!--.*?-->\s*)*(<!doctype\s+html|<html|<head|<body)", re.I | re.S)
_XML = re.compile(rb"^\s*<\?xml", re.I)
# XML formats told apart by their root element (a FictionBook book, an AbiWord or Gnumeric file).
_XML_ROOTS = re.compile(rb"<(FictionBook|abiword|gnm:Workbook|gmr:Workbook)[\s>]")
_XML_ROOT_MIMES = {b"FictionBook": "application/x-fictionbook+xml", b"abiword": "application/x-abiword",
                   b"gnm:Workbook": "application/x-gnumeric", b"gmr:Workbook": "application/x-gnumeric"}
# A mail header block: "Name: value" lines (folded lines go on with a space or tab) up to a blank
# line, with at least two distinct names that mail carries, so that a note starting "Subject: ..."
# stays text. An mbox starts with a "From " separator line followed by such a block (Thunderbird
# writes "From - Thu Dec  3 10:00:00 2026" and keeps folders in files without a suffix).
_MAIL_NAMES = frozenset((b"return-path", b"received", b"from", b"to", b"cc", b"message-id", b"date",
                         b"subject", b"delivered-to", b"mime-version", b"content-type", b"reply-to",
                         b"in-reply-to", b"references", b"sender", b"x-mozilla-status"))
_HEADER_LINE = re.compile(rb"([!-9;-~]+)[ \t]*:")
_FROM_SEPARATOR = re.compile(rb"From \S+[ \t][^\n]*\d{1,2}:\d\d[^\n]*\n")


# What a suffix may be made of. A Maildir message's name ends in its host and flags
# ("1700000000.M1P2.mail.example.com:2,S"): "com:2,s" is no file type.
_SUFFIX = re.compile(r"[a-z0-9_+-]{1,16}")


def extension(name: str) -> str:
    base = name.rsplit("/", 1)[-1]
    if "." not in base.lstrip("."):
        return ""
    ext = base.rsplit(".", 1)[-1].lower()
    return ext if _SUFFIX.fullmatch(ext) else ""


def compound_extension(name: str) -> str:
    """The last two suffixes ("tar.gz", "warc.gz"), or "" when the name has fewer."""
    parts = name.rsplit("/", 1)[-1].lstrip(".").lower().split(".")
    return ".".join(parts[-2:]) if len(parts) >= 3 else ""


# Formats a suffix names only when the content agrees: numbered suffixes (backup.1) are common.
_MAN_SECTION = re.compile(r"[1-9][a-z]{0,8}")
_ROFF_MIMES = ("text/troff", "application/x-troff-man", "text/x-troff-man")
_ROFF = re.compile(rb'''[.'](\\"|[A-Za-z]{1,3}\b|\\}|[ \t]*\n)|\\"''')


def looks_like_roff(head: bytes) -> bool:
    """True when the first line that is not blank is roff: a comment, a request or a macro."""
    return _ROFF.match(head.lstrip(b"\xef\xbb\xbf").lstrip()) is not None


def detect(source: Source, registry: Registry) -> str:
    ext = extension(source.name)
    for suffix in (compound_extension(source.name), ext):
        mime = registry.mime_for_extension(suffix) if suffix else None
        if mime in _ROFF_MIMES and not looks_like_roff(source.head(8192)):
            continue
        if mime:
            return mime
    head = source.head(8192)  # the same window the text converter looks at
    # Any manual section suffix (printf.3const, open_how.2type), when the content is roff.
    if _MAN_SECTION.fullmatch(ext) and _ROFF_MIMES[0] in registry.by_mime and looks_like_roff(head):
        return _ROFF_MIMES[0]
    sniffed = sniff(head)
    # "text/plain" is a weak guess: a hint from outside (HTTP, a mail part) knows better.
    if sniffed == "text/plain" and source.mime and source.mime in registry.by_mime:
        return source.mime
    if sniffed != OCTET and sniffed in registry.by_mime:
        return sniffed
    if source.mime and source.mime in registry.by_mime:
        return source.mime
    if ext:
        guessed, _ = mimetypes.guess_type("x." + ext, strict=False)
        if guessed:
            return guessed
    return sniffed


def sniff(head: bytes) -> str:
    for magic, mime in _MAGIC:
        if head.startswith(magic):
            return mime
    if (media := _sniff_media(head)) is not None:
        return media
    if head.startswith(b"PK\x03\x04"):
        return _sniff_zip(head)
    if head.startswith(b"ustar", 257) or head[257:262] == b"ustar":
        return "application/x-tar"
    if head.lstrip()[:5] == b"<DOC>":
        return "application/x-trec"
    if (sep := _FROM_SEPARATOR.match(head)) and looks_like_headers(head[sep.end():], full=len(head) >= 8192):
        return "application/mbox"
    if looks_like_headers(head, full=len(head) >= 8192):
        return "message/rfc822"
    if _HTML.match(head):
        return "text/html"
    if _XML.match(head):
        if root := _XML_ROOTS.search(head[:2048]):
            return _XML_ROOT_MIMES[root.group(1)]
        return "application/xml" if b"<html" not in head[:512].lower() else "application/xhtml+xml"
    if looks_like_text(head):
        return "text/plain"
    return OCTET


def looks_like_headers(head: bytes, full: bool = False) -> bool:
    """True when ``head`` starts with a mail header block: header lines up to a blank line (or to
    the end of a ``full`` window that headers fill), two or more of them names mail carries."""
    known: set[bytes] = set()
    lines = head.split(b"\n")
    if full and not head.endswith(b"\n"):
        lines.pop()  # the window may have cut the last line
    for n, line in enumerate(lines):
        line = line.rstrip(b"\r")
        if not line:
            return n > 0 and len(known) >= 2
        if line[:1] in (b" ", b"\t"):
            if n == 0:
                return False
            continue
        m = _HEADER_LINE.match(line)
        if m is None:
            return False
        if (name := m.group(1).lower()) in _MAIL_NAMES:
            known.add(name)
    return full and len(known) >= 2


def _sniff_media(head: bytes) -> str | None:
    """Images and audio whose signature is not at the start or needs more than a prefix."""
    riff = {b"WAVE": "audio/wav", b"WEBP": "image/webp"}
    if head.startswith(b"RIFF") and head[8:12] in riff:
        return riff[head[8:12]]
    if head.startswith(b"FORM") and head[8:12] in (b"AIFF", b"AIFC"):
        return "audio/aiff"
    if head.startswith(b"OggS"):
        return "audio/opus" if b"OpusHead" in head[:64] else "audio/ogg"
    if head[4:8] == b"ftyp":
        brand = head[8:12]
        if brand in (b"M4A ", b"M4B ", b"M4P "):
            return "audio/mp4"
        if brand in (b"isom", b"iso2", b"mp41", b"mp42", b"M4V ", b"avc1"):
            return "video/mp4"
    # "BM", the file size, then four reserved zero bytes: "BM" alone starts too many texts.
    if head.startswith(b"BM") and len(head) >= 18 and head[6:10] == b"\x00\x00\x00\x00":
        return "image/bmp"
    return None


def _sniff_zip(head: bytes) -> str:
    # OOXML and ODF put a telling first member name (or mimetype) in the first local header.
    if b"mimetypeapplication/vnd.oasis.opendocument" in head[:200]:
        end = head.find(b"PK", 38)
        return head[38:end if end > 0 else 120].decode("ascii", "replace").strip()
    if b"mimetypeapplication/epub+zip" in head[:200]:
        return "application/epub+zip"
    if b"word/" in head:
        return "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    if b"ppt/" in head:
        return "application/vnd.openxmlformats-officedocument.presentationml.presentation"
    if b"xl/" in head:
        return "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    return "application/zip"


def looks_like_text(head: bytes) -> bool:
    """True unless the bytes look binary: NULs outside a UTF-16 pattern, or many control bytes."""
    if not head:
        return True
    if head.startswith((b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf", b"\x00\x00\xfe\xff")):
        return True
    nuls = head.count(0)
    if nuls:
        # UTF-16 (and UTF-32) without a BOM have NULs at regular places, not scattered.
        from .textcodec import _wide_unicode

        if _wide_unicode(head):
            return True
        even, odd = head[0::2].count(0), head[1::2].count(0)
        if max(even, odd) > 0.4 * len(head) / 2 and min(even, odd) < 0.05 * len(head) / 2:
            return True
        # A few stray NULs in UTF-8 text (a patch of a binary file, a log a crash wrote into): text
        # if the rest is valid UTF-8 with few control bytes (below, NULs among them).
        if nuls > 0.01 * len(head):
            return False
        try:
            codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
        except UnicodeDecodeError:
            return False
    # Tab, newlines, form feed, and ESC/SO/SI, which ISO-2022 encodings use to switch sets.
    controls = len(head) - len(head.translate(None, _CONTROLS))
    return controls < 0.05 * len(head)


_CONTROLS = bytes(b for b in range(32) if b not in (9, 10, 12, 13, 14, 15, 27))
