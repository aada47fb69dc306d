"""OLE compound files (Office 97–2003 documents, Outlook messages): what kind a file is, its document
properties, and whether a password locks it, with olefile and msoffcrypto-tool.

The ``.doc``, ``.ppt``, ``.xls`` and ``.msg`` converters share this: ``open_ole`` refuses bytes that
are no compound file (CorruptFile, so a text file named ``.doc`` or ``.msg`` is converted as what it
is), ``properties`` reads SummaryInformation (title, author, dates...) in the file's code page, and
``refuse_encrypted`` says ``encrypted`` for a password-protected file (RC4, RC4 CryptoAPI, XOR),
whose helper program would otherwise print nothing or call it damaged. ``convert`` takes a compound
file found by its first bytes (no suffix, or a wrong one) to the converter of its kind.
"""

from __future__ import annotations

import codecs
import datetime as dt
import io
import logging
from typing import TYPE_CHECKING

from .detect import extension
from .document import Document
from deskdex.errors import CorruptFile, Encrypted
from .registry import Result, default_registry
from .source import Source
from .textcodec import decode
from .zipcheck import OLE_MAGIC, refuse_encrypted_office

if TYPE_CHECKING:  # olefile is imported when a compound file is converted
    from olefile import OleFileIO

logger = logging.getLogger(__name__)

OLE_MIME = "application/x-ole-storage"
DOC_MIME = "application/msword"
PPT_MIME = "application/vnd.ms-powerpoint"
XLS_MIME = "application/vnd.ms-excel"
MSG_MIME = "application/vnd.ms-outlook"
_KINDS = (DOC_MIME, PPT_MIME, XLS_MIME, MSG_MIME)

# SummaryInformation fields kept as metadata, by olefile's attribute name.
_TEXT_FIELDS = (("title", "title"), ("author", "author"), ("subject", "subject"), ("keywords", "keywords"),
                ("comments", "comments"), ("last_saved_by", "modified_by"), ("company", "company"),
                ("category", "category"))
_DATE_FIELDS = (("create_time", "created"), ("last_saved_time", "modified"))


def open_ole(data: bytes, what: str) -> OleFileIO:
    """The compound file in ``data``; CorruptFile when it is none or its directory is broken."""
    import olefile

    if not data.startswith(OLE_MAGIC):
        raise CorruptFile(f"not a {what}: not an OLE compound file")
    try:
        ole: OleFileIO = olefile.OleFileIO(data)
        emptied = {name: fixed for name in _PROPERTY_STREAMS
                   if ole.exists(name) and (fixed := _without_long_vectors(ole.openstream(name).read())) is not None}
        if emptied:
            # Opened again on a copy (BytesIO copies on write), written through olefile's public
            # write_stream: the caller's bytes and file stay as they are.
            ole.close()
            ole = olefile.OleFileIO(io.BytesIO(data), write_mode=True)
            for name, fixed in emptied.items():
                ole.write_stream(name, fixed)
        return ole
    except Exception as exc:  # OleFileError, struct.error, IndexError... on damaged sectors
        raise CorruptFile(f"not a readable {what}: broken OLE container: {type(exc).__name__}: {exc}") from exc


_PROPERTY_STREAMS = ("\x05SummaryInformation", "\x05DocumentSummaryInformation")
_VT_VECTOR = 0x1000


def _without_long_vectors(stream: bytes) -> bytes | None:
    """The property set ``stream`` with each vector property longer than the stream retyped as
    VT_EMPTY (0), None when it has none. olefile 0.47 loops once per element of a vector, up to
    2**32 times for a damaged count, appending to a list until memory runs out (its issues 162 and
    170); a vector cannot hold more elements than its stream has bytes, so a longer one is a defect
    of that property alone, which then reads as empty, the others as written. Read as olefile reads
    it (MS-OLEPS): the first section's offset at byte 44; in it, a count and (id, offset) pairs."""
    if len(stream) < 48:
        return None
    section = int.from_bytes(stream[44:48], "little")
    if section + 8 > len(stream):
        return None
    count = min(int.from_bytes(stream[section + 4:section + 8], "little"), (len(stream) - section) // 8)
    fixed: bytearray | None = None
    for i in range(count):
        entry = section + 8 + 8 * i
        if entry + 8 > len(stream):
            break
        at = section + int.from_bytes(stream[entry + 4:entry + 8], "little")
        if at + 8 > len(stream):
            continue
        kind = int.from_bytes(stream[at:at + 4], "little")
        if kind & _VT_VECTOR and int.from_bytes(stream[at + 4:at + 8], "little") > len(stream):
            logger.debug("property %d: a vector of %d elements in a %d-byte stream, read as empty",
                         int.from_bytes(stream[entry:entry + 4], "little"),
                         int.from_bytes(stream[at + 4:at + 8], "little"), len(stream))
            fixed = fixed if fixed is not None else bytearray(stream)
            fixed[at:at + 4] = bytes(4)
    return None if fixed is None else bytes(fixed)


def kind(ole: OleFileIO) -> str | None:
    """The MIME type of what the compound file holds, by its streams (None: no kind we convert)."""
    if ole.exists("WordDocument"):
        return DOC_MIME
    if ole.exists("PowerPoint Document"):
        return PPT_MIME
    if ole.exists("Workbook") or ole.exists("Book"):
        return XLS_MIME
    if ole.exists("__properties_version1.0") or any(e[0].startswith("__substg1.0_") for e in ole.listdir()):
        return MSG_MIME
    return None


def properties(ole: OleFileIO) -> dict[str, str]:
    """Title, author, subject, keywords, comments, last author, company, category and dates from the
    SummaryInformation streams, as text; a broken property stream gives nothing, never an error."""
    try:
        meta = ole.get_metadata()
    except Exception as exc:  # a damaged property set: the document's text still counts
        logger.debug("unreadable document properties: %s", exc)
        return {}
    codepage = meta.codepage if isinstance(meta.codepage, int) else None
    out: dict[str, str] = {}
    for attr, key in _TEXT_FIELDS:
        text = _text(getattr(meta, attr, None), codepage)
        if text:
            out[key] = text
    for attr, key in _DATE_FIELDS:
        when = getattr(meta, attr, None)
        # A zero FILETIME (1601-01-01) is what writers put for "never".
        if isinstance(when, dt.datetime) and when.year > 1601:
            out[key] = when.replace(microsecond=0).isoformat()
    return out


def _text(value: object, codepage: int | None) -> str:
    if isinstance(value, bytes):
        raw = value.split(b"\x00", 1)[0]
        codec = _codec(codepage)
        try:
            value = raw.decode(codec) if codec else decode(raw)[0]
        except UnicodeDecodeError:
            value = decode(raw)[0]
    return " ".join(str(value).split()) if value else ""


# Code pages with no Python codec named cpNNNN: Unicode, the Mac ones (a Mac Office file says 10008
# for simplified Chinese), the EUC and ISO 2022 ones.
_CODEPAGES = {1200: "utf-16-le", 1201: "utf-16-be", 65001: "utf-8", 20127: "ascii", 10000: "mac_roman",
              10001: "shift_jis", 10002: "big5", 10003: "euc_kr", 10008: "gb2312", 10006: "mac_greek",
              10007: "mac_cyrillic", 10029: "mac_latin2", 10079: "mac_iceland", 10081: "mac_turkish",
              20932: "euc_jp", 51932: "euc_jp", 51949: "euc_kr", 50220: "iso2022_jp", 54936: "gb18030"}


def _codec(codepage: int | None) -> str | None:
    """The Python codec of a Windows code page (1252, 932, 65001...), None when unknown."""
    if codepage is None:
        return None
    name = _CODEPAGES.get(codepage) or (f"iso8859-{codepage - 28590}" if 28591 <= codepage <= 28605 else f"cp{codepage}")
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


def checked_properties(data: bytes, stream: str, what: str) -> dict[str, str]:
    """The document properties of an Office 97-2003 file that must hold ``stream`` (CorruptFile
    without it), after refusing it as Encrypted when it has a password."""
    ole = open_ole(data, what)
    try:
        if not ole.exists(stream):
            raise CorruptFile(f"not a {what}: no '{stream}' stream")
        props = properties(ole)
    finally:
        ole.close()
    refuse_encrypted(data, what)
    return props


def refuse_encrypted(data: bytes, what: str) -> None:
    """Encrypted when msoffcrypto-tool finds a password on the Word, Excel or PowerPoint file;
    damage it cannot parse is left to the converter's own reader."""
    import msoffcrypto

    try:
        locked = msoffcrypto.OfficeFile(io.BytesIO(data)).is_encrypted()
    except Exception as exc:  # FileFormatError, struct.error... on damaged or other OLE files
        logger.debug("encryption check of %s failed: %s", what, exc)
        return
    if locked:
        raise Encrypted(f"{what} is encrypted: it needs a password to be read")


def convert(source: Source, mime: str) -> Result:
    """A compound file found by its first bytes: converted by the converter of its kind."""
    data = source.read()
    ole = open_ole(data, "OLE compound file")
    try:
        found = kind(ole)
    finally:
        ole.close()
    if found is None:
        refuse_encrypted_office(data, "Office file")  # a password-protected DOCX, XLSX or PPTX
        if default_registry().mime_for_extension(extension(source.name)) in _KINDS:
            # A .doc (.ppt, .xls, .msg) whose streams its converter did not find: damage, not another kind.
            raise CorruptFile("not a readable Office file or Outlook message: no stream of the kind its suffix names")
        # Thumbs.db, an MSI package, a Visio drawing...: found by name and path.
        return Document(uri=source.uri, mime=OLE_MIME, title=source.name, meta={"content": "none"})
    return default_registry().converter(found)(source, found)
