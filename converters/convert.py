"""One Source in, its Document and those of its members out, each member failing on its own.

A container stops taking members at a limit, keeping those converted and saying how many it left
out. Past ``Limits.members`` (a mail store's messages excepted: ``limits.SIZE_BOUNDED``), or when it
breaks after some members, the same bytes would stop the same way: the file is ``partial``
(``limits.left_out``). Once ``CONTAINER_SHARE`` of the time limit is spent, it stops rather than be
killed with nothing kept: the members read are kept and the container itself fails ``timeout``,
which a busy machine may cause, so it is tried again later like any timeout.
"""

from __future__ import annotations

import logging
import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import GeneratorType
from typing import Any, Generator

from .detect import OCTET, detect, sniff
from . import language
from .document import Document
from deskdex.errors import (ConversionError, ConverterMissing, CorruptFile, HostileInput, NotConfigured,
                            SizeLimit, TimeLimit, UnsupportedFormat)
from .limits import SIZE_BOUNDED, Limits, left_out
from .registry import Member, Registry, default_registry
from .source import Source

logger = logging.getLogger(__name__)

# The limits of the conversion running now: containers read them to cap their members.
_LIMITS: ContextVar[Limits] = ContextVar("deskdex_limits", default=Limits())  # noqa: B039 (frozen)
# When containers stop taking members (time.monotonic()): the rest of the time limit is for the
# language of what was converted, the worker's hook and sending it all back before the kill.
_DEADLINE: ContextVar[float] = ContextVar("deskdex_deadline", default=float("inf"))
CONTAINER_SHARE = 0.6


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
    until = _DEADLINE.set(time.monotonic() + limits.time_seconds * CONTAINER_SHARE)
    try:
        _convert(source, registry, limits, outcomes)
    finally:
        _DEADLINE.reset(until)
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
        _members(source, mime, result, registry, limits, out)
    except ConversionError as exc:
        out.append(Outcome(source.uri, reason=exc.reason, message=str(exc)))
    except RecursionError:
        out.append(Outcome(source.uri, reason=HostileInput.reason, message="structure nested too deeply"))
    except MemoryError:
        raise  # the worker process dies and the pool records the memory limit
    except Exception as exc:  # a converter bug must cost one file, never the run
        logger.exception("converter failed on %s", source.uri)
        out.append(Outcome(source.uri, reason="converter_bug", message=f"{type(exc).__name__}: {exc}"))


def _members(source: Source, mime: str, gen: Generator[Document | Member, None, None], registry: Registry,
             limits: Limits, out: list[Outcome]) -> None:
    parent_at = len(out)
    count = 0
    counted = mime not in SIZE_BOUNDED
    why = ""  # the limit that stopped the container early
    late = False  # that limit was the time
    try:
        for item in gen:
            if isinstance(item, Document):
                out.insert(parent_at, Outcome(source.uri, _cap(item, limits)))
                continue
            assert isinstance(item, Member)
            if counted and count >= limits.members:
                why = f"over the limit of {limits.members:,} members"
                break
            if time.monotonic() > _DEADLINE.get():
                why, late = f"the time limit ({limits.time_seconds:g} s) ran out", True
                break
            count += 1
            if item.error is not None:
                out.append(Outcome(item.source.uri, reason=item.error.reason, message=str(item.error)))
                continue
            start = len(out)
            _convert(item.source, registry, limits, out)
            for o in out[start:]:  # here, so that the deadline above counts this work too
                if o.document is not None:
                    language.tag(o.document)
    except ConversionError as exc:
        # A failure of the container after some members: the members found so far stay,
        # and the container says it is incomplete.
        parent = out[parent_at] if len(out) > parent_at and out[parent_at].uri == source.uri else None
        if parent is None or parent.document is None:
            out.insert(parent_at, Outcome(source.uri, reason=exc.reason, message=str(exc)))
            return
        left_out(parent.document, f"members after the first {count:,} left out: {exc.reason}: {exc}")
    finally:
        gen.close()  # a container stopped early lets go of its file now
    if len(out) == parent_at or out[parent_at].uri != source.uri:
        out.insert(parent_at, Outcome(source.uri, name_only(source, source.mime or OCTET)))
    parent_doc = out[parent_at].document
    if why and parent_doc is not None and late:
        out[parent_at] = Outcome(source.uri, reason=TimeLimit.reason, message=_left(parent_doc, count, why))
    elif why and parent_doc is not None:
        left_out(parent_doc, _left(parent_doc, count, why))


def _left(parent: Document, kept: int, why: str) -> str:
    """How many members a container left out, when it said how many it holds (``members``, an
    mbox's ``messages``), else from where."""
    total = next((int(v) for k in ("members", "messages") if (v := parent.meta.get(k, "")).isdigit()), 0)
    if total > kept:
        return f"{total - kept:,} of {total:,} members left out: {why}"
    return f"members after the first {kept:,} left out: {why}"


def _cap(doc: Document, limits: Limits) -> Document:
    """Keep at most ``limits.text_chars`` of text, dropping whole blocks past the limit."""
    total = 0
    for i, b in enumerate(doc.blocks):
        total += len(b.text)
        if total > limits.text_chars:
            del doc.blocks[i:]
            left_out(doc, f"text after the first {limits.text_chars:,} characters left out "
                          "(the text one document keeps)")
            break
    return doc
