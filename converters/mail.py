"""E-mail: one message (EML) or a mailbox (mbox, MMDF), with the standard library's ``email`` package.

A message is a Document: the subject as title, From/To/Cc/Date/Message-ID as metadata, the
plain-text body (or the HTML one, through ``converters.html``) as blocks. Each attachment is a
Member of its message (``a.eml#report.pdf``); an attached message is a member of its own.
A mailbox yields a parent Document and every message as a Member (``box.mbox#message-3.eml``),
so a bad message costs that message only.
"""

from __future__ import annotations

import email.errors
import logging
import re
from email import policy
from email.header import decode_header, make_header
from email.message import EmailMessage, Message, MIMEPart
from email.parser import BytesParser
from typing import Iterator

from .document import Document
from deskdex.errors import CorruptFile
from . import content
from .html import from_text
from .registry import Member
from .source import Source
from .textcodec import decode

logger = logging.getLogger(__name__)

_PARA = re.compile(r"\n\s*\n")
# An mbox message starts at a "From " line (the file's first line or after a newline) that looks
# like the separator mail programs write, "From sender Tue Feb  1 10:00:00 2022": an unescaped
# "From here on..." in a body (mboxo writers leave those) has no time of day and splits nothing.
_FROM_LINE = re.compile(rb"(?:\A|\n)From \S*[ \t][^\n]*\b\d{1,2}:\d\d[^\n]*\n")
# MMDF's separator: a line of four ^A before and after each message.
_MMDF = b"\x01\x01\x01\x01\n"
_HEADERS = ("from", "to", "cc", "date", "message-id", "in-reply-to")
_KEPT = frozenset((*_HEADERS, "subject"))
_SURROGATE = re.compile("[\udc80-\udcff]")
_UNSAFE = re.compile(r"[\x00-\x1f/\\#?]+")


def eml(source: Source, mime: str) -> Iterator[Document | Member]:
    data = source.read()
    try:
        msg = BytesParser(policy=policy.default).parsebytes(data)
    except Exception as exc:  # the parser is lenient; anything it raises means unusable bytes
        raise CorruptFile(f"unreadable message: {type(exc).__name__}: {exc}") from exc
    if not isinstance(msg, EmailMessage) or (not msg.keys() and not msg.get_payload()):
        raise CorruptFile("no mail headers")
    yield message_document(msg, source.uri, mime, source.name)
    yield from attachments(msg, source)


def message_document(msg: EmailMessage, uri: str, mime: str, fallback_title: str) -> Document:
    doc = Document(uri=uri, mime=mime)
    headers = _headers(msg)
    for name in _HEADERS:
        if value := headers.get(name):
            doc.meta[name.replace("-", "_")] = value
    body = _body(msg)
    if body is not None:
        text, subtype = body
        if subtype == "html":
            html_doc = from_text(text, uri, mime, main_content=content.FOR_WHOLE_TEXTS) if text.strip() else None
            doc.blocks.extend(html_doc.blocks if html_doc else [])
        else:
            for para in _PARA.split(text.replace("\r\n", "\n")):
                doc.add("quote" if para.lstrip().startswith(">") else "p", para.strip("\n"))
    doc.title = headers.get("subject") or fallback_title
    return doc


def _headers(msg: Message) -> dict[str, str]:
    """The first value of each header kept, decoded and on one line. Read raw: policy.default's
    parsed header objects cost 0.8 ms a message (an mbox's messages took 1.3 ms each, 0.5 ms
    now), and they trip over some broken headers."""
    out: dict[str, str] = {}
    for name, raw in msg.raw_items():
        key = name.lower()
        if key in _KEPT and key not in out:
            text = str(raw)
            if not text.isascii() and _SURROGATE.search(text):
                text = _eight_bit(text, msg)
            out[key] = " ".join(_decoded(text).split())
    return out


def _eight_bit(text: str, msg: Message) -> str:
    """A header written in 8-bit bytes (which the parser keeps as surrogates): UTF-8, else the
    charset the message declares for its body, else what the bytes look like."""
    raw = text.encode("utf-8", "surrogateescape")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        declared = msg.get_content_charset()
    except Exception:  # a Content-Type header broken past parsing
        declared = None
    return decode(raw, declared)[0]


def _decoded(raw: object) -> str:
    """A raw header value with its RFC 2047 words decoded, as far as they decode."""
    text = str(raw)
    if "=?" not in text:
        return text
    try:
        return str(make_header(decode_header(text)))
    except (LookupError, UnicodeError, ValueError, email.errors.HeaderParseError):
        return text


def _body(msg: EmailMessage) -> tuple[str, str] | None:
    try:
        part = msg.get_body(preferencelist=("plain", "html"))
    except Exception:  # malformed MIME structure: fall back to the whole payload
        part = None
    if part is None:
        if msg.is_multipart():
            return None
        part = msg
    if part.get_content_maintype() != "text":
        return None
    return _part_text(part), part.get_content_subtype()


def _part_text(part: MIMEPart) -> str:
    try:
        content = part.get_content()
        if isinstance(content, str):
            return content
    except (LookupError, UnicodeError, ValueError, AssertionError):
        pass  # an unknown or lying charset: detect it from the bytes
    raw = _payload_bytes(part)
    return decode(raw, part.get_content_charset())[0] if raw else ""


def _payload_bytes(part: Message) -> bytes:
    """The payload of a part that is not multipart, its transfer encoding undone (b"" if none)."""
    payload = part.get_payload(decode=True)  # None for a multipart part
    return payload if isinstance(payload, bytes) else b""


def attachments(msg: EmailMessage, source: Source) -> Iterator[Member]:
    seen: set[str] = set()
    try:
        parts = list(msg.iter_attachments())
    except Exception as exc:
        logger.debug("cannot list attachments of %s: %s", source.uri, exc)
        return
    for n, part in enumerate(parts, 1):
        ctype = part.get_content_type()
        if ctype == "message/rfc822":
            inner = part.get_payload()  # the attached message, alone in a list
            first = inner[0] if isinstance(inner, list) and inner else None
            payload = first.as_bytes() if isinstance(first, Message) else b""
            name = f"message-{n}.eml"
        else:
            payload = _payload_bytes(part)
            name = member_name(part.get_filename() or "", n)
        while name in seen:
            name = "_" + name
        seen.add(name)
        yield Member(source.child(name, payload, mime=ctype))


def member_name(name: str, n: int) -> str:
    """An attachment's file name as an inner name: no path, no URI delimiters."""
    name = _UNSAFE.sub("_", name.replace("\\", "/").rsplit("/", 1)[-1]).strip(" ._")
    return name or f"attachment-{n}"


def mbox(source: Source, mime: str) -> Iterator[Document | Member]:
    """Every message of a mailbox, mbox (a "From " line before each) or MMDF (each between two
    ``^A^A^A^A`` lines). Not capped by the member count: a message is its own bytes in the file
    (limits.SIZE_BOUNDED)."""
    data = source.read()
    spans = _mmdf_spans(data) if data.startswith(_MMDF) else _mbox_spans(data)
    if not spans:
        raise CorruptFile("an MMDF mailbox without a message" if data.startswith(_MMDF) else
                          "not an mbox: no 'From ' line")
    parent = Document(uri=source.uri, mime=mime, title=source.name, meta={"messages": str(len(spans))})
    yield parent
    for n, (begin, end) in enumerate(spans, 1):
        chunk = data[begin:end]
        if chunk.startswith(b"From "):
            chunk = chunk[chunk.find(b"\n") + 1:]  # the "From " separator is not part of the message
        # mboxrd quoting: ">From " at a line start was "From " in the message.
        chunk = re.sub(rb"(?m)^>(>*From )", rb"\1", chunk)
        yield Member(source.child(f"message-{n}.eml", chunk, mime="message/rfc822"))


def _mbox_spans(data: bytes) -> list[tuple[int, int]]:
    starts = [m.start() + (1 if m.group().startswith(b"\n") else 0) for m in _FROM_LINE.finditer(data)]
    return list(zip(starts, [*starts[1:], len(data)]))


def _mmdf_spans(data: bytes) -> list[tuple[int, int]]:
    """Where each MMDF message lies: between a ``^A^A^A^A`` line and the next (a message may
    still start with a "From " line, as Python's mailbox and some mail programs write it)."""
    spans = []
    at = 0
    while (begin := data.find(_MMDF, at)) >= 0:
        begin += len(_MMDF)
        end = data.find(_MMDF, begin)
        end = len(data) if end < 0 else end
        if data[begin:end].strip():
            spans.append((begin, end))
        at = end + len(_MMDF)
    return spans
