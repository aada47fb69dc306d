"""The one form every converter produces: a title, metadata and an ordered list of blocks.

A block is a heading, paragraph, list item, table cell, preformatted text or quote, made of
inline runs (plain, emphasised, strong, code, or a link with its anchor text). Blocks found to
be boilerplate (navigation, footers, repeated link lists) are kept but marked, so ranking can
down-weight them. Serialised, a Document is tagged text (see ``converters.tagged``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Iterator

BLOCK_KINDS = ("h", "p", "li", "td", "pre", "quote")
INLINE_STYLES = ("", "em", "strong", "code")

# What XML 1.0 cannot carry (C0 controls but tab and newlines, lone surrogates, U+FFFE/U+FFFF):
# no text a person reads, and a Document must serialise to tagged text and back unchanged.
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def clean(text: str) -> str:
    """Drop the characters XML 1.0 cannot hold; line ends become "\\n" (an XML parser turns
    "\\r\\n" and a lone "\\r" into "\\n", so only those survive a round trip)."""
    return _INVALID_XML.sub("", text).replace("\r\n", "\n").replace("\r", "\n")


@dataclass(slots=True)
class Inline:
    """A run of text inside a block; with ``href`` it is a link and ``text`` its anchor text."""

    text: str
    style: str = ""
    href: str | None = None

    def __reduce__(self) -> tuple[type[Inline], tuple[str, str, str | None]]:
        # Pickled as its fields: every converted document goes from a worker to the writer, and
        # a dataclass's default (its slots as a dict, per object) took three times as long.
        return Inline, (self.text, self.style, self.href)


@dataclass(slots=True)
class Block:
    kind: str
    runs: list[Inline] = field(default_factory=list)
    level: int = 0  # heading level (1-6) or list depth; 0 where it means nothing
    boilerplate: bool = False
    # The 1-based page the block starts on, for paged formats (PDF, DjVu, DVI, PostScript): the
    # preview shows it beside each hit. None where the format has no pages.
    page: int | None = None

    @property
    def text(self) -> str:
        return "".join(r.text for r in self.runs)

    def __reduce__(self) -> tuple[type[Block], tuple[str, list[Inline], int, bool, int | None]]:
        return Block, (self.kind, self.runs, self.level, self.boilerplate, self.page)  # as Inline's, above

    @classmethod
    def of(
        cls, kind: str, text: str, *, level: int = 0, boilerplate: bool = False, page: int | None = None
    ) -> "Block":
        return cls(kind, [Inline(text)], level=level, boilerplate=boilerplate, page=page)


@dataclass(slots=True)
class Document:
    """A converted document. ``uri`` is ``file:///...`` or ``http(s)://...``; a child of a
    compound file has the parent's URI and ``#inner/path``."""

    uri: str
    mime: str = "application/octet-stream"
    title: str = ""
    meta: dict[str, str] = field(default_factory=dict)
    blocks: list[Block] = field(default_factory=list)

    def add(
        self, kind: str, text: str, *, level: int = 0, boilerplate: bool = False, page: int | None = None
    ) -> None:
        """Append a block of plain text (cleaned of what XML cannot hold), skipping empty ones."""
        text = clean(text)
        if text and not text.isspace():
            self.blocks.append(Block.of(kind, text, level=level, boilerplate=boilerplate, page=page))

    def settle_title(self, declared: str, fallback: str) -> None:
        """The title from metadata when it says one, else the first heading, else ``fallback``
        (the file name): what every converter of a structured format does."""
        self.title = declared.strip() or next((b.text for b in self.headings()), "") or fallback

    def headings(self) -> Iterator[Block]:
        return (b for b in self.blocks if b.kind == "h")

    def text(self, main_only: bool = False) -> str:
        """Plain text: the title, then each block on its own line."""
        return "\n".join(_lines(self.title, self.blocks, main_only))

    def body_text(self, boilerplate: bool = False, limit: int | None = None) -> str:
        """Text of the blocks only: the main content, or with ``boilerplate`` only the boilerplate.
        ``limit``: at most that many characters, joined from the first blocks only (what reads a
        text's beginning need not join a 20 MB text)."""
        if limit is None:
            return "\n".join(b.text for b in self.blocks if b.boilerplate == boilerplate)
        head, size = [], 0
        for b in self.blocks:
            if b.boilerplate == boilerplate:
                head.append(b.text)
                size += len(b.text) + 1
                if size > limit:
                    break
        return "\n".join(head)[:limit]

    def body_chunks(self, boilerplate: bool = False, size: int = 1 << 20) -> list[str]:
        """``body_text`` as pieces of about ``size`` characters (``body_pieces``); one for most texts."""
        return list(self.body_pieces(boilerplate, size))

    def body_pieces(self, boilerplate: bool = False, size: int = 1 << 20) -> Iterator[str]:
        """``body_text`` as pieces of about ``size`` characters, cut between blocks, and a longer
        block at a space, each made as it is asked for. A str is as wide as its widest character:
        one emoji makes a 20 MB text 77 MB once joined, while its pieces without one stay a byte a
        character; a library reading the text (tantivy's) copies it piece by piece too."""
        head: list[str] = []
        length = 0
        given = False
        for b in self.blocks:
            if b.boilerplate != boilerplate:
                continue
            text = b.text
            if len(text) > size:
                if head:
                    yield "\n".join(head)
                    head, length = [], 0
                yield from _cut(text, size)
                given = True
                continue
            head.append(text)
            length += len(text) + 1
            if length >= size:
                yield "\n".join(head)
                head, length, given = [], 0, True
        if head or not given:
            yield "\n".join(head)

    def links(self) -> Iterator[Inline]:
        return (r for b in self.blocks for r in b.runs if r.href)


def _cut(text: str, size: int) -> Iterator[str]:
    """``text`` in pieces of at most ``size`` characters, each ending before a space or line end
    where one is found (a word is cut only in a text without any)."""
    i = 0
    while len(text) - i > size:
        cut = max(text.rfind(" ", i, i + size), text.rfind("\n", i, i + size))
        if cut <= i:
            cut = i + size
        yield text[i:cut]
        i = cut
    yield text[i:]


def _lines(title: str, blocks: Iterable[Block], main_only: bool) -> Iterator[str]:
    if title:
        yield title
    for b in blocks:
        if not (main_only and b.boilerplate):
            yield b.text
