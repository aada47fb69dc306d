"""One Source in, its Document and those of its members out, each member failing on its own."""

from __future__ import annotations

import logging
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import GeneratorType
from typing import Any, Iterator

from .detect import OCTET, detect, sniff
from . import language
from .document import Document
from deskdex.errors import (ConversionError, ConverterMissing, CorruptFile, HostileInput, LimitExceeded,
                            NotConfigured, SizeLimit, UnsupportedFormat)
from .limits import Limits
from .registry import Member, Registry, default_registry
from .source import Source

logger = logging.getLogger(__name__)

# The limits of the conversion running now: containers read them to cap their members.
_LIMITS: ContextVar[Limits] = ContextVar("deskdex_limits", default=Limits())


def current_limits() -> Limits:
    return _LIMITS.get()


@dataclass(slots=True)
class Outcome:
    """What became of one URI: a Document, or an error with its reason."""

    uri: str
    document: Document | None = None
    reason: str = ""
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)  # what a worker-side hook adds (isolation.py)

    @property
    def ok(self) -> bool:
        return self.document is not None


def name_only(source: Source, mime: str) -> Document:
    """A document for a file we cannot read inside: still findable by its name and path."""
    return Document(uri=source.uri, mime=mime, title=source.name, meta={"content": "none"})


def convert(source: Source, registry: Registry | None = None, limits: Limits = Limits()) -> list[Outcome]:
    """Convert ``source``; the first Outcome is always the source itself."""
    registry = registry or default_registry()
    outcomes: list[Outcome] = []
    token = _LIMITS.set(limits)
    try:
        _convert(source, registry, limits, outcomes)
    finally:
        _LIMITS.reset(token)
    for o in outcomes:
        if o.document is not None:
            language.tag(o.document)  # here, in the worker: the one writer has enough to do
    return outcomes


def _convert(source: Source, registry: Registry, limits: Limits, out: list[Outcome]) -> None:
    try:
        if source.depth > limits.depth:
            raise HostileInput(f"nested more than {limits.depth} containers deep")
        size = source.size()
        mime = detect(source, registry)
        if size > limits.file_bytes and not registry.headers_only(mime):
            raise SizeLimit(f"{size} bytes is over the file size limit of {limits.file_bytes}")
        try:
            conv = registry.converter(mime)
        except UnsupportedFormat:
            out.append(Outcome(source.uri, name_only(source, mime or OCTET)))
            return
        except NotConfigured as exc:
            # A failure, not a name-only document: it is tried again once the converter can run.
            raise ConverterMissing(str(exc)) from exc
        try:
            result = conv(source, mime)
        except CorruptFile:
            # The suffix named a format the bytes are not (a mail saved as .txt, an HTML error
            # page saved as .pdf): when the content says what it is, convert it as that.
            sniffed = sniff(source.head(8192))
            if sniffed == mime or sniffed not in registry.by_mime:
                raise
            mime = sniffed
            result = registry.converter(mime)(source, mime)
        if isinstance(result, Document):
            out.append(Outcome(source.uri, _cap(result, limits)))
            return
        if isinstance(result, Source):
            # A compressed single file: what it holds is the document, under the file's own URI.
            start = len(out)
            _convert(result, registry, limits, out)
            first = out[start] if len(out) > start else None
            if first is not None and first.document is not None and first.uri == source.uri:
                first.document.meta.setdefault("compression", mime)
            return
        assert isinstance(result, GeneratorType)
        _members(source, result, registry, limits, out)
    except ConversionError as exc:
        out.append(Outcome(source.uri, reason=exc.reason, message=str(exc)))
    except RecursionError:
        out.append(Outcome(source.uri, reason=HostileInput.reason, message="structure nested too deeply"))
    except MemoryError:
        raise  # the worker process dies and the pool records the memory limit
    except Exception as exc:  # a converter bug must cost one file, never the run
        logger.exception("converter failed on %s", source.uri)
        out.append(Outcome(source.uri, reason="converter_bug", message=f"{type(exc).__name__}: {exc}"))


def _members(source: Source, gen: Iterator[Document | Member], registry: Registry, limits: Limits,
             out: list[Outcome]) -> None:
    parent_at = len(out)
    count = 0
    try:
        for item in gen:
            if isinstance(item, Document):
                out.insert(parent_at, Outcome(source.uri, _cap(item, limits)))
                continue
            assert isinstance(item, Member)
            count += 1
            if count > limits.members:
                raise LimitExceeded(f"more than {limits.members} members")
            if item.error is not None:
                out.append(Outcome(item.source.uri, reason=item.error.reason, message=str(item.error)))
                continue
            _convert(item.source, registry, limits, out)
    except ConversionError as exc:
        # A failure of the container after some members: the members found so far stay,
        # and the container says it is incomplete.
        parent = out[parent_at] if len(out) > parent_at and out[parent_at].uri == source.uri else None
        if parent is None or parent.document is None:
            out.insert(parent_at, Outcome(source.uri, reason=exc.reason, message=str(exc)))
            return
        parent.document.meta["incomplete"] = f"{exc.reason}: {exc}"
    if len(out) == parent_at or out[parent_at].uri != source.uri:
        out.insert(parent_at, Outcome(source.uri, name_only(source, source.mime or OCTET)))


def _cap(doc: Document, limits: Limits) -> Document:
    """Keep at most ``limits.text_chars`` of text, dropping whole blocks past the limit."""
    total = 0
    for i, b in enumerate(doc.blocks):
        total += len(b.text)
        if total > limits.text_chars:
            del doc.blocks[i:]
            doc.meta["truncated"] = "yes"
            break
    return doc
