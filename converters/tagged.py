"""Tagged text: the small XML dialect a Document is stored and shown as (docs/tagged-text.md).

    <doc uri="file:///home/a/report.pdf" mime="application/pdf">
    <title>Quarterly report</title>
    <meta name="author">A. Person</meta>
    <h level="1">Results</h>
    <p>Sales <em>rose</em>, see <a href="https://example.org/q3">the Q3 table</a>.</p>
    <li level="1">first point</li>
    <p page="2">Text that starts on the second page of a paged document.</p>
    <p boilerplate="1">Home | About | Contact</p>
    </doc>

``dumps`` and ``loads`` round-trip exactly. Characters XML 1.0 cannot carry (NUL and other C0
controls, lone surrogates) are dropped on the way out, so any converter output serialises.
"""

from __future__ import annotations

from typing import Iterator
from xml.sax.saxutils import escape, quoteattr

from lxml import etree

from .document import BLOCK_KINDS, Block, Document, Inline, clean
from deskdex.errors import CorruptFile

_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True, remove_blank_text=False)


def _text(s: str) -> str:
    return escape(clean(s))


def _attr(s: str) -> str:
    return quoteattr(clean(s))


def dumps(doc: Document) -> str:
    return "".join(_pieces(doc))


# Pieces encoded together by dumps_utf8: large enough that the joins cost nothing, small enough
# that a 20 MB text never exists as one str besides its bytes.
_CHUNK = 1 << 20


def dumps_utf8(doc: Document) -> bytes:
    """``dumps(doc).encode("utf-8")`` without the whole text as a str: a writer's peak on a 20 MB
    text (the pieces, their join and its encoding at once: 170 MiB) is the bytes and one chunk."""
    chunks: list[bytes] = []
    pending: list[str] = []
    size = 0
    for piece in _pieces(doc):
        pending.append(piece)
        size += len(piece)
        if size >= _CHUNK:
            chunks.append("".join(pending).encode("utf-8"))
            pending, size = [], 0
    chunks.append("".join(pending).encode("utf-8"))
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _pieces(doc: Document) -> Iterator[str]:
    yield f"<doc uri={_attr(doc.uri)} mime={_attr(doc.mime)}>\n"
    if doc.title:
        yield f"<title>{_text(doc.title)}</title>\n"
    for name, value in doc.meta.items():
        yield f"<meta name={_attr(name)}>{_text(value)}</meta>\n"
    for b in doc.blocks:
        attrs = ""
        if b.level:
            attrs += f' level="{b.level}"'
        if b.boilerplate:
            attrs += ' boilerplate="1"'
        if b.page is not None:
            attrs += f' page="{b.page}"'
        yield f"<{b.kind}{attrs}>"
        for r in b.runs:
            if len(r.text) > _CHUNK and r.href is None and not r.style:
                yield from _long_text(r.text)  # a plain text's one paragraph can be its whole 20 MB
                continue
            t = _text(r.text)
            if r.href is not None:
                style = f" style={_attr(r.style)}" if r.style else ""
                yield f"<a href={_attr(r.href)}{style}>{t}</a>"
            elif r.style:
                yield f"<{r.style}>{t}</{r.style}>"
            else:
                yield t
        yield f"</{b.kind}>\n"
    yield "</doc>\n"


def _long_text(s: str) -> Iterator[str]:
    """``_text(s)`` a piece at a time: each piece is copied twice (cleaned, escaped) where the whole
    text would be, and is as wide as its own widest character. A piece never ends between the "\r"
    and "\n" of a line end, which ``clean`` makes one "\n"."""
    i = 0
    while i < len(s):
        j = i + _CHUNK
        if s[j - 1:j] == "\r":
            j += 1
        yield _text(s[i:j])
        i = j


def loads(data: str | bytes) -> Document:
    if isinstance(data, str):
        data = data.encode("utf-8")
    try:
        root = etree.fromstring(data, _PARSER)
    except etree.XMLSyntaxError as exc:
        raise CorruptFile(f"not valid tagged text: {exc}") from exc
    if root.tag != "doc":
        raise CorruptFile(f"tagged text must start with <doc>, not <{root.tag!s}>")  # parsed: a str
    doc = Document(uri=root.get("uri", ""), mime=root.get("mime", ""))
    for el in root:
        if el.tag == "title":
            doc.title = el.text or ""
        elif el.tag == "meta":
            doc.meta[el.get("name", "")] = el.text or ""
        elif el.tag in BLOCK_KINDS:
            doc.blocks.append(_block(el))
    return doc


def _block(el: etree._Element) -> Block:
    runs: list[Inline] = []
    if el.text:
        runs.append(Inline(el.text))
    for child in el:
        if child.tag == "a":
            runs.append(Inline(child.text or "", child.get("style", ""), child.get("href", "")))
        else:
            runs.append(Inline(child.text or "", str(child.tag)))
        if child.tail:
            runs.append(Inline(child.tail))
    page = el.get("page")
    return Block(
        str(el.tag),
        runs,
        level=int(el.get("level", "0")),
        boilerplate=el.get("boilerplate") == "1",
        page=None if page is None else _page(page),
    )


def _page(value: str) -> int:
    """A block's page attribute: a positive integer, or the tagged text is corrupt."""
    if not value.isdigit() or int(value) < 1:
        raise CorruptFile(f"a block's page must be a positive integer, not {value!r}")
    return int(value)


def plain_text(data: str | bytes) -> str:
    """The text of the blocks of stored tagged text, without building a Document (for snippets,
    which come from the body: the title is shown beside them already)."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    root = etree.fromstring(data, _PARSER)
    return "\n".join("".join(el.itertext()) for el in root if el.tag not in ("meta", "title"))
