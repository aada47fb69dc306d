"""Zip-based documents (ODF, OOXML, EPUB) opened safely: bombs and broken archives refused early.

Sizes are checked from the central directory before anything is inflated; ``zipfile`` stops
reading a member at its declared size, so a lying header cannot inflate past the check.
"""

from __future__ import annotations

import io
import logging
import zipfile

from deskdex.errors import CorruptFile, Encrypted, HostileInput, SizeLimit
from .limits import Limits

logger = logging.getLogger(__name__)

# Small members compress well (XML, repeated cells): the ratio only counts past this size.
_RATIO_FLOOR = 16 * 1024 * 1024


def open_zip(data: bytes, what: str, limits: Limits = Limits()) -> zipfile.ZipFile:
    """The archive, after checking member count, member sizes and expansion ratio."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        refuse_encrypted_office(data, what)
        raise CorruptFile(f"not a readable {what} (broken zip: {exc})") from exc
    if len(infos) > limits.members:
        raise HostileInput(f"{what} has {len(infos)} zip members, over the limit of {limits.members}")
    total = packed = 0
    for info in infos:
        if info.file_size > limits.member_bytes:
            raise SizeLimit(f"{what} member {info.filename} inflates to {info.file_size} bytes")
        total += info.file_size
        packed += info.compress_size
    if total > _RATIO_FLOOR and total > limits.expansion_ratio * max(packed, 1):
        raise HostileInput(f"{what} inflates {total // max(packed, 1)}-fold: a zip bomb")
    if total > limits.file_bytes:
        raise SizeLimit(f"{what} inflates to {total} bytes, over the limit of {limits.file_bytes}")
    return zf


OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
# The streams Office puts in the OLE container that replaces the zip of a password-protected
# DOCX, XLSX or PPTX (MS-OFFCRYPTO), as the directory entries spell their names: UTF-16LE.
_ENCRYPTED_OOXML = ("EncryptionInfo".encode("utf-16-le"), "EncryptedPackage".encode("utf-16-le"))


def refuse_encrypted_office(data: bytes, what: str) -> None:
    """A password-protected OOXML file is an OLE container, not a zip: say it is encrypted
    rather than let the failed zip read as damage. The directory's stream names are matched
    in the bytes (an OLE file of any other kind has neither name)."""
    if data.startswith(OLE_MAGIC) and all(name in data for name in _ENCRYPTED_OOXML):
        raise Encrypted(f"{what} is encrypted: it needs a password to be read")


def refuse_encrypted(info: zipfile.ZipInfo, what: str) -> None:
    """Bit 0 of a member's flags marks ZIP encryption (traditional or AES): say so before
    ``zipfile`` raises a bare RuntimeError that would read as damage."""
    if info.flag_bits & 0x1:
        raise Encrypted(f"{what} member {info.filename} is encrypted: it needs a password to be read")


def read_member(zf: zipfile.ZipFile, name: str, what: str) -> bytes:
    """One member's bytes; a missing or damaged member is a CorruptFile, an encrypted one Encrypted."""
    try:
        info = zf.getinfo(name)
    except KeyError as exc:
        raise CorruptFile(f"{what} has no {name}") from exc
    refuse_encrypted(info, what)
    try:
        return zf.read(info)
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError, ValueError) as exc:
        # NotImplementedError: an unknown compression method
        raise CorruptFile(f"{what} member {name} cannot be read: {exc}") from exc
