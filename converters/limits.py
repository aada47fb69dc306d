"""Limits a conversion runs under; defaults suit a laptop, every one is a setting."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deskdex.settings import Config

    from .document import Document

# The metadata key of a document a limit cut short. The catalog lists such a file with the failures
# (reason ``partial``, index/collection.py), so what was left out is never silent.
PARTIAL = "partial"
# Containers whose members are their own bytes in the file, each at least a separator line: a mail
# store's messages are bounded by the file size limit (and what the time limit lets convert), not
# by ``Limits.members``, the count that stops archives of cheaply declared members.
SIZE_BOUNDED = frozenset({"application/mbox"})


@dataclass(frozen=True, slots=True)
class OcrOptions:
    """What OCR (converters/ocr.py) may do: the ``[ocr]`` settings, carried to the workers with the limits."""

    enabled: bool = True
    languages: tuple[str, ...] = ()  # Tesseract's codes ("eng", "deu"); empty: every one installed, English first
    min_pixels: int = 70_000  # images with fewer pixels (width x height) are not read: icons, bullets
    seconds: float = 30.0  # OCR time one file may take; pages past it are left (``ocr: partial``)


@dataclass(frozen=True, slots=True)
class Limits:
    time_seconds: float = 60.0  # per file, enforced by killing the worker process
    memory_bytes: int = 1024 * 1024 * 1024  # address space of a worker process
    file_bytes: int = 256 * 1024 * 1024  # larger files are recorded as too large, not read
    text_chars: int = 20_000_000  # text kept per document
    depth: int = 8  # containers inside containers
    members: int = 20_000  # members of one container (not of a mail store: SIZE_BOUNDED)
    member_bytes: int = 128 * 1024 * 1024  # one uncompressed member
    expansion_ratio: int = 200  # uncompressed/compressed above which a member is a bomb
    ocr: OcrOptions = OcrOptions()

    @classmethod
    def from_settings(cls, cfg: Config) -> Limits:
        """The limits the settings ``time_limit``, ``memory_limit_mb``, ``max_file_mb`` and ``[ocr]`` ask for."""
        s = cfg.settings
        ocr = OcrOptions(enabled=s.ocr.enabled, languages=s.ocr.languages, min_pixels=s.ocr.min_pixels,
                         seconds=s.ocr.time_limit)
        return cls(time_seconds=s.time_limit, memory_bytes=s.memory_limit_mb * 2**20,
                   file_bytes=s.max_file_mb * 2**20, ocr=ocr)


def left_out(doc: Document, what: str) -> None:
    """Record that ``doc`` was kept only in part, ``what`` saying what was left out and why ("20 of
    20,050 members left out: ..."): converted parts stay indexed, and ``deskdex status`` counts the
    file as partial and ``--failures`` lists it with ``what``. A second cut adds to the first."""
    before = doc.meta.get(PARTIAL)
    doc.meta[PARTIAL] = f"{before}; {what}" if before else what
