"""The text family: Markdown, reStructuredText, source code, CSV/TSV, JSON and XML.

Each is decoded with ``textcodec.decode`` (never assumed UTF-8) and turned into blocks:
Markdown and reST keep headings, lists, code and emphasis; source code is preformatted text
with its language as ``code_language``; CSV/TSV cells become table cells; JSON keeps its string
values; XML keeps its text content without element names. XML is parsed without DTDs, entity
expansion or network access, so an entity bomb or an external entity is refused, not expanded.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import re
from typing import TYPE_CHECKING, Any, Iterator

from lxml import etree

from .detect import extension, looks_like_text
from .document import Block, Document, Inline
from deskdex.errors import CorruptFile, HostileInput
from .registry import SOURCE_LANGUAGES
from .source import Source
from .textcodec import decode
from . import xmlsafe

if TYPE_CHECKING:
    from docutils import nodes

logger = logging.getLogger(__name__)

_PARA = re.compile(r"\n\s*\n")
# A top-level definition starts a new chunk of code and names it (a heading ranks the name).
_DEFINITION = re.compile(
    r"^(?:export\s+|pub(?:\(crate\))?\s+|public\s+|static\s+|async\s+|default\s+)*"
    r"(?:def|class|func|fn|function|interface|struct|enum|trait|impl|module|type|sub|proc)\s+([A-Za-z_]\w*)",
    re.M)


def _text(source: Source) -> tuple[str, str]:
    data = source.read()
    if not looks_like_text(data[:8192]):
        raise CorruptFile("binary data, not text")
    text, encoding = decode(data)
    return text.replace("\r\n", "\n").replace("\r", "\n"), encoding


def _title(doc: Document, fallback: str) -> str:
    h = next(doc.headings(), None)
    return h.text.strip() if h is not None and h.text.strip() else fallback


# --- Markdown ---------------------------------------------------------------------------------

def markdown(source: Source, mime: str) -> Document:
    from markdown_it import MarkdownIt

    text, encoding = _text(source)
    doc = Document(uri=source.uri, mime=mime, meta={"encoding": encoding})
    text = _front_matter(text, doc)
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    heading = depth = quotes = 0
    cell = False
    for tok in tokens:
        if tok.type == "heading_open":
            heading = int(tok.tag[1])
        elif tok.type == "heading_close":
            heading = 0
        elif tok.type in ("bullet_list_open", "ordered_list_open", "bullet_list_close", "ordered_list_close"):
            depth += tok.nesting
        elif tok.type in ("blockquote_open", "blockquote_close"):
            quotes += tok.nesting
        elif tok.type in ("th_open", "td_open", "th_close", "td_close"):
            cell = tok.nesting > 0
        elif tok.type in ("fence", "code_block"):
            doc.add("pre", tok.content.rstrip("\n"))
        elif tok.type == "inline":
            kind, level = ("h", heading) if heading else ("td", 0) if cell else ("li", depth) if depth \
                else ("quote", 0) if quotes else ("p", 0)
            runs = list(_md_inlines(tok.children or []))
            if "".join(r.text for r in runs).strip():
                doc.blocks.append(Block(kind, runs, level))
    doc.title = doc.meta.pop("title", "") or _title(doc, source.name)
    return doc


def _front_matter(text: str, doc: Document) -> str:
    """YAML front matter: ``title``, ``author`` and ``date`` into metadata, the rest dropped."""
    if not text.startswith("---\n"):
        return text
    end = text.find("\n---", 4)
    if end < 0:
        return text
    for line in text[4:end].splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in ("title", "author", "date", "description", "tags"):
            doc.meta[key.strip().lower()] = value.strip().strip("\"'")
    return text[end + 4:]


def _md_inlines(children: list[Any]) -> Iterator[Inline]:
    style, href = "", None
    for t in children:
        if t.type in ("em_open", "strong_open"):
            style = t.type[:-5]
        elif t.type in ("em_close", "strong_close"):
            style = ""
        elif t.type == "link_open":
            href = str(t.attrs.get("href", ""))
        elif t.type == "link_close":
            href = None
        elif t.type == "code_inline":
            yield Inline(t.content, "code", href)
        elif t.type in ("softbreak", "hardbreak"):
            yield Inline(" ", style, href)
        elif t.type == "image":
            yield Inline(t.content, style, href)
        elif t.content:
            yield Inline(t.content, style, href)


# --- reStructuredText -------------------------------------------------------------------------

# No file inclusion, no raw output, no messages: a document must not read other files.
_RST_SETTINGS = {"file_insertion_enabled": False, "raw_enabled": False, "report_level": 5,
                 "halt_level": 5, "warning_stream": io.StringIO(), "input_encoding": "unicode",
                 "doctitle_xform": True, "docinfo_xform": True, "syntax_highlight": "none"}


def rest(source: Source, mime: str) -> Document:
    from docutils import nodes
    from docutils.core import publish_doctree
    from docutils.utils import SystemMessage

    text, encoding = _text(source)
    doc = Document(uri=source.uri, mime=mime, meta={"encoding": encoding})
    try:
        tree = publish_doctree(text, settings_overrides=dict(_RST_SETTINGS, warning_stream=io.StringIO()))
    except (SystemMessage, ValueError, IndexError, AttributeError) as exc:
        raise CorruptFile(f"unparseable reStructuredText: {exc}") from exc
    for field in tree.findall(nodes.docinfo):
        for item in field.children:
            if not isinstance(item, nodes.Element):  # docinfo holds elements only (field, author, ...)
                continue
            name = item.tagname if item.tagname != "field" else item[0].astext()
            doc.meta[name.lower()] = item.astext() if item.tagname != "field" else item[1].astext()
    title = tree.get("title", "")
    kinds = {nodes.paragraph: "p", nodes.literal_block: "pre", nodes.entry: "td", nodes.term: "li"}
    for node in tree.findall(lambda n: isinstance(n, (nodes.title, *kinds))):
        if any(isinstance(a, (nodes.system_message, nodes.docinfo)) for a in _ancestors(node)):
            continue  # docutils' own warnings ("directive disabled") are not the document's text
        if isinstance(node, nodes.title):
            parent = node.parent
            if isinstance(parent, nodes.document):
                continue  # the document title, held in ``title``
            level = sum(1 for a in _ancestors(node) if isinstance(a, nodes.section))
            doc.blocks.append(Block("h", _rst_inlines(node), level=max(1, level)))
            continue
        if isinstance(node, nodes.paragraph) and isinstance(node.parent, nodes.entry):
            continue  # the entry itself is the cell
        kind = kinds[type(node)] if type(node) in kinds else "p"
        if kind == "p" and any(isinstance(a, nodes.list_item) for a in _ancestors(node)):
            kind = "li"
        elif kind == "p" and any(isinstance(a, nodes.block_quote) for a in _ancestors(node)):
            kind = "quote"
        runs = [Inline(node.astext())] if kind in ("pre", "td") else _rst_inlines(node)
        if "".join(r.text for r in runs).strip():
            doc.blocks.append(Block(kind, runs, level=1 if kind == "li" else 0))
    doc.title = title or _title(doc, source.name)
    return doc


def _ancestors(node: nodes.Node) -> Iterator[nodes.Element]:
    while node.parent is not None:
        node = node.parent
        yield node


def _rst_inlines(node: nodes.Node) -> list[Inline]:
    from docutils import nodes

    styles: dict[type[nodes.Node], str] = {nodes.emphasis: "em", nodes.strong: "strong", nodes.literal: "code"}
    runs: list[Inline] = []
    for child in node.children:
        if isinstance(child, nodes.reference):
            runs.append(Inline(child.astext(), "", child.get("refuri", "") or child.get("refid", "")))
        elif isinstance(child, (nodes.Text, nodes.Element)):
            runs.append(Inline(child.astext().replace("\n", " "), styles.get(type(child), "")))
    return runs


# --- source code ------------------------------------------------------------------------------

def source_code(source: Source, mime: str) -> Document:
    text, encoding = _text(source)
    doc = Document(uri=source.uri, mime=mime, title=source.name, meta={"encoding": encoding})
    language = SOURCE_LANGUAGES.get(extension(source.name))
    if language:
        doc.meta["code_language"] = language
    starts = [m.start() for m in _DEFINITION.finditer(text)]
    for begin, end in zip([0, *starts], [*starts, len(text)]):
        chunk = text[begin:end]
        m = _DEFINITION.match(chunk)
        if m:
            doc.add("h", m.group(1), level=2)
        doc.add("pre", chunk.strip("\n"))
    return doc


# --- CSV and TSV ------------------------------------------------------------------------------

def table(source: Source, mime: str) -> Document:
    text, encoding = _text(source)
    doc = Document(uri=source.uri, mime=mime, title=source.name, meta={"encoding": encoding})
    if mime == "text/tab-separated-values":
        dialect: Any = csv.excel_tab
    else:
        try:
            dialect = csv.Sniffer().sniff(text[:8192], delimiters=",;\t|")
        except csv.Error:
            dialect = csv.excel
    csv.field_size_limit(16 * 2**20)
    rows = 0
    try:
        for rows, row in enumerate(csv.reader(io.StringIO(text), dialect), 1):
            if rows == 1:
                doc.meta["columns"] = " | ".join(c.strip() for c in row if c.strip())
            for cell in row:
                doc.add("td", cell.strip())
    except csv.Error as exc:
        raise CorruptFile(f"unreadable {mime}: {exc}") from exc
    doc.meta["rows"] = str(rows)
    return doc


# --- JSON -------------------------------------------------------------------------------------

def json_text(source: Source, mime: str) -> Document:
    text, encoding = _text(source)
    doc = Document(uri=source.uri, mime=mime, title=source.name, meta={"encoding": encoding})
    try:
        values = [json.loads(text)]
    except json.JSONDecodeError as exc:
        if exc.msg != "Extra data":
            raise CorruptFile(f"not JSON: {exc}") from exc
        try:  # JSON Lines: one value a line
            values = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc2:
            raise CorruptFile(f"not JSON: {exc2}") from exc2
    for value in values:
        if isinstance(value, dict) and isinstance(value.get("title"), str) and doc.title == source.name:
            doc.title = value["title"].strip() or source.name
        for s in _json_strings(value):
            doc.add("p", s)
    if not doc.blocks:
        # Keys and numbers are structure beside text; a file of nothing else ({"retries": 3}) is
        # still searchable by them.
        for value in values:
            for s in _json_strings(value, everything=True):
                doc.add("p", s)
    return doc


def _json_strings(value: Any, everything: bool = False) -> Iterator[str]:
    """String values (``everything``: also keys, numbers and booleans), depth first, without
    recursion (a deep file cannot exhaust the stack)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            yield v
        elif isinstance(v, dict):
            if everything:
                stack.extend(reversed([x for kv in v.items() for x in kv]))
            else:
                stack.extend(reversed(list(v.values())))
        elif isinstance(v, list):
            stack.extend(reversed(v))
        elif everything and isinstance(v, (int, float)):
            yield str(v).lower()


# --- XML --------------------------------------------------------------------------------------

_DECLARED = re.compile(rb"""<\?xml[^>]*encoding\s*=\s*["']([A-Za-z0-9_.:-]+)""")
_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")
_ENTITY_REF = re.compile(r"&([^#;\s&]+);")
_ENTITY_TEXT_LIMIT = 1 << 20  # what all the entities of one file may expand to, in characters
_ATTRIBUTE_TEXT_LIMIT = 1 << 20  # attribute text kept of a file without text (_attribute_values)


def xml_text(source: Source, mime: str) -> Document:
    data = source.read()
    if not data.strip():
        return Document(uri=source.uri, mime=mime, title=source.name)
    encoding = ""
    try:
        root = etree.fromstring(data, xmlsafe.parser())
    except etree.XMLSyntaxError as exc:
        if "entit" in str(exc).lower() and ("loop" in str(exc) or "amplification" in str(exc)):
            raise HostileInput(f"XML entity expansion refused: {exc}") from exc
        # Real files are often not quite XML (an encoding libxml2 lacks, a DocBook fragment using
        # entities of its parent, a truncated feed): decode ourselves and let libxml2 recover.
        m = _DECLARED.search(data[:200])
        text, encoding = decode(data, m.group(1).decode("ascii") if m else None)
        try:
            root = etree.fromstring(_DECLARATION.sub("", text, count=1), xmlsafe.parser(recover=True))
        except (etree.XMLSyntaxError, ValueError):
            root = None
        # libxml2's recovery can drop everything after the damage: then the words between the
        # tags are the better copy of the document.
        if root is None or _words(" ".join(root.itertext())) < 0.8 * _words(_TAG.sub(" ", text)):
            return _salvaged(source, mime, text, encoding, f"not well-formed XML: {exc}")
    if root is None:
        return _salvaged(source, mime, decode(data)[0], "", "XML without a root element")
    _refuse_entity_bombs(root)
    # A parsed element's tag is a str (lxml's stubs also allow the bytes or QName one may set).
    doc = Document(uri=source.uri, mime=mime, meta={"root": _local(str(root.tag))})
    info = root.getroottree().docinfo
    if encoding or info.encoding:
        doc.meta["encoding"] = (encoding or info.encoding).lower()
    entities = _plain_entities(root)
    stack = [root]
    while stack:
        el = stack.pop()
        local = _local(str(el.tag)).lower()
        if _has_own_text(el):
            # Mixed content (text beside inline children) stays one block.
            text = " ".join(_xml_text(el, entities).split())
            if local == "title" and not doc.title:
                doc.title = text
            kind = "h" if local in ("title", "h1", "h2", "h3", "head", "heading") else "p"
            doc.add(kind, text, level=1 if kind == "h" else 0)
        else:
            stack.extend(reversed([c for c in el if isinstance(c.tag, str)]))
    if not doc.blocks:
        _attribute_values(root, doc)
    if not doc.title:
        doc.title = source.name
    return doc


def _attribute_values(root: etree._Element, doc: Document) -> None:
    """A file whose data is all in attributes (an Office part, a settings file, `.rels`): its attribute
    values with a letter in them, one block per element, so that it is still found by what it holds.
    Only for such files: beside text, attributes are mostly markup (ids, styles, drawing paths)."""
    budget = _ATTRIBUTE_TEXT_LIMIT
    for el in root.iter():
        if not isinstance(el.tag, str):
            continue
        values = [v for v in el.attrib.values() if any(c.isalpha() for c in v)]
        text = " ".join(" ".join(values).split())
        if text:
            doc.add("p", text[:budget])
            budget -= len(text)
            if budget <= 0:
                return


_TAG = re.compile(r"<[^>]*>")


def _words(text: str) -> int:
    return len(text.split())


def _salvaged(source: Source, mime: str, text: str, encoding: str, why: str) -> Document:
    """Markup too broken for a parser (a fragment, a DTD, a truncated file): its words between
    the tags, as a text search would still want them. The document says it was salvaged."""
    doc = Document(uri=source.uri, mime=mime, title=source.name, meta={"salvaged": why})
    if encoding:
        doc.meta["encoding"] = encoding
    for para in re.split(r"\n\s*\n", _TAG.sub(" ", text)):
        doc.add("p", " ".join(para.split()))
    return doc


def _has_own_text(el: etree._Element) -> bool:
    return bool((el.text or "").strip()) or any((c.tail or "").strip() or not isinstance(c.tag, str) for c in el)


def _xml_text(el: etree._Element, entities: dict[str, str]) -> str:
    """The text under ``el``; an internal entity is read from its declaration, never expanded."""
    parts = [el.text or ""]
    for child in el:
        if isinstance(child, etree._Entity):
            parts.append(entities.get(child.name, " "))
        elif isinstance(child.tag, str):
            parts.append(" " + _xml_text(child, entities) + " ")
        parts.append(child.tail or "")
    return "".join(parts)


def _plain_entities(root: etree._Element) -> dict[str, str]:
    dtd = root.getroottree().docinfo.internalDTD
    if dtd is None:
        return {}
    # Only entities of plain text: one that refers to others is left unread, never expanded.
    return {e.name: e.content for e in dtd.iterentities()
            if e.name is not None and e.content and e.system_url is None and "&" not in e.content}


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1].rsplit(":", 1)[-1]


def _refuse_entity_bombs(root: etree._Element) -> None:
    """Refuse entities that would expand past a limit (billion laughs) or refer to themselves.

    The size each entity would expand to is computed from the declarations, never by expanding.
    """
    dtd = root.getroottree().docinfo.internalDTD
    if dtd is None:
        return
    bodies = {e.name: e.content or "" for e in dtd.iterentities() if e.name is not None and e.system_url is None}
    sizes: dict[str, int] = {}

    def size(name: str, path: tuple[str, ...]) -> int:
        if name in path:
            raise HostileInput(f"XML entity {name!r} refers to itself")
        if name not in sizes:
            body = bodies.get(name, "")
            refs = _ENTITY_REF.findall(body)
            sizes[name] = len(body) + sum(size(r, (*path, name)) for r in refs if r in bodies)
        return sizes[name]

    total = sum(size(name, ()) for name in bodies)
    if total > _ENTITY_TEXT_LIMIT:
        raise HostileInput(f"XML entities would expand to {total} characters (entity expansion bomb)")
