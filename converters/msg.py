"""Outlook messages (MSG) with extract-msg: the message, then each attachment as a member.

Shaped as an e-mail (``mail.py``): the subject as title, From/To/Cc/Date/Message-ID/In-Reply-To as
metadata, the plain-text body (or the HTML one, through ``converters.html``) as blocks. Each file
attached is a Member (``a.msg#report.pdf``); an attached message, which Outlook keeps as a storage
inside the file, is written out as a ``.msg`` of its own (``a.msg#message-2.msg``) and converted in
its turn. Attachments that only point elsewhere (web links) are left out. The file is opened before
anything is yielded, so a text file named ``.msg`` (Tcl's message catalogues) fails at once as
CorruptFile and is converted as the text it is.
"""

from __future__ import annotations

import datetime as dt
import logging
import warnings
from typing import TYPE_CHECKING, Any, Iterator

from .document import Document
from deskdex.errors import CorruptFile
from . import content
from .html import from_text
from .mail import member_name
from .ole import MSG_MIME
from .registry import Member
from .source import Source
from .textcodec import decode
from .zipcheck import OLE_MAGIC

if TYPE_CHECKING:  # extract-msg is imported when a message is converted
    from extract_msg.msg_classes.msg import MSGFile

logger = logging.getLogger(__name__)

_HEADERS = (("sender", "from"), ("to", "to"), ("cc", "cc"), ("messageId", "message_id"), ("inReplyTo", "in_reply_to"))


def convert(source: Source, mime: str) -> Iterator[Document | Member]:
    data = source.read()
    if not data.startswith(OLE_MAGIC):
        raise CorruptFile("not an Outlook message: not an OLE compound file")
    msg = _open(data)
    return _items(msg, source, mime)


def _open(data: bytes) -> MSGFile:
    import extract_msg

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return extract_msg.openMsg(data, strict=False)
    except Exception as exc:  # InvalidFileFormatError, olefile and struct errors on damaged bytes
        raise CorruptFile(f"not a readable Outlook message: {type(exc).__name__}: {exc}") from exc


def _items(msg: MSGFile, source: Source, mime: str) -> Iterator[Document | Member]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                doc = _document(msg, source, mime)
                attached = list(getattr(msg, "attachments", None) or [])
            except Exception as exc:  # a property stream broken past what extract-msg forgives
                raise CorruptFile(f"broken Outlook message: {type(exc).__name__}: {exc}") from exc
            yield doc
            seen: set[str] = set()
            for n, att in enumerate(attached, 1):
                member = _member(att, n, source, seen)
                if member is not None:
                    yield member
    finally:
        msg.close()


def _document(msg: Any, source: Source, mime: str) -> Document:
    doc = Document(uri=source.uri, mime=mime)
    for attr, key in _HEADERS:
        value = _field(msg, attr)
        if value:
            doc.meta[key] = value
    when = _field(msg, "date")
    if when:
        doc.meta["date"] = when
    if (kind := _field(msg, "classType")) and kind.lower() != "ipm.note":
        doc.meta["message_class"] = kind
    body = _field(msg, "body")
    if body.strip():
        for para in body.replace("\r\n", "\n").split("\n\n"):
            doc.add("quote" if para.lstrip().startswith(">") else "p", para.strip("\n"))
    else:
        html = getattr(msg, "htmlBody", None)
        if isinstance(html, bytes) and html.strip():
            doc.blocks.extend(from_text(decode(html)[0], source.uri, mime, main_content=content.FOR_WHOLE_TEXTS).blocks)
    doc.title = " ".join(_field(msg, "subject").split()) or source.name
    return doc


def _field(msg: Any, attr: str) -> str:
    """A message property as text; one extract-msg cannot read is left out, not an error."""
    try:
        value = getattr(msg, attr, None)
    except Exception as exc:  # a damaged property stream of one field
        logger.debug("unreadable %s of an Outlook message: %s", attr, exc)
        return ""
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if value is None or isinstance(value, bytes):
        return ""
    return str(value) if attr == "body" else " ".join(str(value).split())


def _member(att: Any, n: int, source: Source, seen: set[str]) -> Member | None:
    from extract_msg.enums import AttachmentType

    kind = getattr(att, "type", None)
    ctype: str | None
    try:
        if kind in (AttachmentType.MSG, AttachmentType.SIGNED_EMBEDDED):
            name, payload, ctype = f"message-{n}.msg", att.data.exportBytes(), MSG_MIME
        elif kind in (AttachmentType.DATA, AttachmentType.SIGNED) and isinstance(att.data, bytes):
            filename = getattr(att, "longFilename", None) or getattr(att, "shortFilename", None) or ""
            mimetype = getattr(att, "mimetype", None)
            name, payload, ctype = member_name(str(filename), n), att.data, mimetype if isinstance(mimetype, str) else None
        else:
            logger.debug("attachment %d of %s is a %s: left out", n, source.uri, kind)
            return None
    except Exception as exc:  # an attached message extract-msg cannot write out again
        name = f"attachment-{n}"
        return Member(source.child(_unique(name, seen), b""),
                      CorruptFile(f"unreadable attachment: {type(exc).__name__}: {exc}"))
    return Member(source.child(_unique(name, seen), payload, mime=ctype))


def _unique(name: str, seen: set[str]) -> str:
    while name in seen:
        name = "_" + name
    seen.add(name)
    return name
