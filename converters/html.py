"""HTML and XHTML: title, headings, paragraphs, lists, tables, quotes and links with anchor text.

Scripts, styles and other non-text elements are dropped. After the walk, ``converters.content``
marks the boilerplate blocks (navigation, footers, link lists), which are kept; ``nav``, ``header``,
``footer`` and ``aside`` ancestors and class/id names are hints to it.
"""

from __future__ import annotations

import functools
import logging
import re

import lxml.html
from lxml import etree

from . import content
from .document import Block, Document, Inline
from deskdex.errors import CorruptFile
from .source import Source
from .textcodec import decode

_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.I)
_SPACE = re.compile(r"\s+")
logger = logging.getLogger(__name__)

DROP = {"script", "style", "noscript", "template", "svg", "math", "head", "iframe", "object",
        "canvas", "select", "button", "form"}
BOILER = {"nav", "header", "footer", "aside", "menu"}
# Text beside an article's running text, not part of it: what trafilatura leaves out on purpose
# and ``content`` does not put back (see ``content.BESIDE_NAMES``).
BESIDE = {"figure", "figcaption"}
HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
BLOCKS = {"p": "p", "div": "p", "section": "p", "article": "p", "main": "p", "li": "li", "dt": "li",
          "dd": "li", "td": "td", "th": "td", "pre": "pre", "blockquote": "quote", "tr": "p",
          "table": "p", "ul": "p", "ol": "p", "dl": "p", "figure": "p", "figcaption": "p", "caption": "p",
          "address": "p", "center": "p", "body": "p", "br": "p", "hr": "p", "fieldset": "p",
          "legend": "p", "summary": "p", "details": "p", "label": "p", "option": "p",
          # Boilerplate containers are blocks of their own, so their text never joins a main block.
          "nav": "p", "header": "p", "footer": "p", "aside": "p", "menu": "p"}
# Inline formatting inside running text. Counted as tags, they break a paragraph of prose into
# many small plateaus (one word in <code><span>, as Sphinx writes) and the notes' token method
# loses the main text; links still count, being what navigation is made of.
INLINE = {"em", "i", "b", "strong", "code", "span", "small", "sup", "sub", "kbd", "tt", "abbr", "cite",
          "font", "u", "s", "mark", "q", "var", "samp", "dfn", "bdi", "bdo", "wbr", "time", "big"}
STYLES = {"em": "em", "i": "em", "cite": "em", "strong": "strong", "b": "strong", "code": "code",
          "kbd": "code", "samp": "code", "tt": "code"}


def convert(source: Source, mime: str, main_content: str | None = content.DEFAULT) -> Document:
    data = source.read()
    if not data.strip():
        return Document(uri=source.uri, mime=mime, title=source.name)
    m = _CHARSET.search(data[:4096])
    text, encoding = decode(data, m.group(1).decode("ascii") if m else source_charset(source))
    return from_text(text, source.uri, mime, fallback_title=source.name, encoding=encoding, main_content=main_content)


def source_charset(source: Source) -> str | None:
    if source.mime and "charset=" in source.mime:
        return source.mime.split("charset=", 1)[1].split(";")[0].strip()
    return None


def parse(text: str) -> lxml.html.HtmlElement:
    # lxml refuses str input carrying an XML encoding declaration; the text is decoded already.
    text = re.sub(r"^\s*<\?xml[^>]*>", "", text, count=1)
    try:
        return lxml.html.document_fromstring(text)
    except (etree.ParserError, ValueError) as exc:
        raise CorruptFile(f"unparseable HTML: {exc}") from exc


def from_text(text: str, uri: str, mime: str, fallback_title: str = "", encoding: str = "",
              main_content: str | None = content.DEFAULT) -> Document:
    """Convert HTML text; ``main_content`` names the method of ``converters.content`` that marks
    boilerplate (None keeps only the element hints: ``nav``, ``footer``, ...)."""
    root = parse(text)
    doc = Document(uri=uri, mime=mime)
    if encoding:
        doc.meta["encoding"] = encoding
    _head(root, doc)
    body = root.find("body")
    walker = _Walker(doc)
    walker.walk(body if body is not None else root, boiler=False, pre=False)
    walker.flush()
    if main_content:
        content.mark(doc, walker.page, main_content, root)
    if not doc.title:
        h = next(doc.headings(), None)
        doc.title = h.text if h is not None else fallback_title
    return doc


def _head(root: lxml.html.HtmlElement, doc: Document) -> None:
    lang = root.get("lang") or root.get("{http://www.w3.org/XML/1998/namespace}lang")
    if lang:
        doc.meta["language"] = lang
    title = root.find(".//title")
    if title is not None:
        doc.title = _SPACE.sub(" ", title.text_content()).strip()
    for meta in root.iterfind(".//meta"):
        name = (meta.get("name") or meta.get("property") or "").lower()
        content = (meta.get("content") or "").strip()
        if content and name in ("author", "description", "keywords", "dc.creator", "dc.date",
                                "date", "og:title", "generator"):
            doc.meta[name.removeprefix("dc.").replace("og:title", "og_title").replace("creator", "author")] = content


class _Walker:
    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.runs: list[Inline] = []
        self.kind = "p"
        self.level = 0
        self.boiler = False
        self.hint = 0
        self.beside = False
        self.alt_words = 0  # of the block's words, those of images' alt text
        self.page = content.PageTokens()
        # The open elements that are page structure (serial numbers, outermost first) and the
        # innermost box whose class names a box of the text (content.TEXT_BOX_NAMES): the
        # current block's, taken when it starts.
        self.path: list[int] = []
        self.serial = 0
        self.box = -1
        self.block_path: tuple[int, ...] = ()
        self.block_box = -1

    def flush(self) -> None:
        if self.runs:
            text = "".join(r.text for r in self.runs)
            if text.strip():
                if self.kind != "pre":
                    _trim(self.runs)
                if self.hint or self.boiler:
                    self.page.hints[len(self.doc.blocks)] = -1 if self.boiler else self.hint
                    if self.hint < 0 and not self.boiler:
                        self.page.named.add(len(self.doc.blocks))
                if self.block_box >= 0 and not self.boiler:
                    self.page.boxes[len(self.doc.blocks)] = self.block_box
                # A block of alt text only is an image, beside the text as a figure is.
                if self.beside or content.count_words(text) <= self.alt_words:
                    self.page.beside.add(len(self.doc.blocks))
                self.page.paths.append(self.block_path)
                self.doc.blocks.append(Block(self.kind, self.runs, self.level, self.boiler))
        self.runs = []
        self.alt_words = 0

    def start(self, kind: str, level: int, boiler: bool, hint: int, beside: bool) -> None:
        self.flush()
        self.kind, self.level, self.boiler, self.hint, self.beside = kind, level, boiler, hint, beside
        self.block_path, self.block_box = tuple(self.path), self.box

    def text(self, s: str | None, style: str, href: str | None, pre: bool) -> None:
        if not s:
            return
        if not pre:
            s = _SPACE.sub(" ", s)
        self.page.words(content.count_words(s), len(self.doc.blocks), link=href is not None)
        if self.runs and self.runs[-1].style == style and self.runs[-1].href == href:
            self.runs[-1].text += s
        else:
            self.runs.append(Inline(s, style, href))

    def walk(self, el: etree._Element, boiler: bool, pre: bool, style: str = "", href: str | None = None,
             hint: int = 0, beside: bool = False, box: int = -1) -> None:
        if not isinstance(el.tag, str):
            return
        tag = el.tag.lower()
        if tag in DROP:
            # The notes' token method counts the tags of a form or an svg even though its text is dropped.
            self.page.tags(2 * sum(1 for e in el.iter() if isinstance(e.tag, str)))
            return
        counted = tag not in INLINE  # inline formatting is not page structure (see INLINE)
        if counted:
            self.page.tags()
            self.serial += 1
            self.path.append(self.serial)
        boiler = boiler or tag in BOILER or _hidden(el)
        own = _name_hint(el, 0)
        names = el.get("class") or ""
        if counted and content.TEXT_BOX_NAMES.search(names) and _text_box(names):
            box = self.serial
            if own < 0:  # its own class names boilerplate ("sidebar"), not an id above it
                self.page.named_boxes.add(box)
        hint = own or hint
        self.box = box
        beside = beside or tag in BESIDE or bool(content.BESIDE_NAMES.search(names))
        block = None
        if tag in HEADINGS:
            block = ("h", HEADINGS[tag])
        elif tag in BLOCKS:
            block = (BLOCKS[tag], 0)
        if block:
            self.start(block[0], block[1], boiler, hint, beside)
        pre = pre or tag == "pre"
        style = STYLES.get(tag, style)
        if tag == "a" and el.get("href"):
            href = el.get("href")
        if tag == "img" and el.get("alt"):
            self.text(" " + el.get("alt", "") + " ", style, href, pre)
            self.alt_words += content.count_words(el.get("alt", ""))
        self.text(el.text, style, href, pre)
        for child in el:
            self.walk(child, boiler, pre, style, href, hint, beside, box)
            self.box = box
            if isinstance(child.tag, str) and child.tag.lower() in (HEADINGS.keys() | BLOCKS.keys()):
                self.start(block[0] if block else self.kind, block[1] if block else self.level,
                           boiler if block else self.boiler, hint if block else self.hint,
                           beside if block else self.beside)
            self.text(child.tail, style, href, pre)
        if block:
            self.flush()
        if counted:
            self.page.tags()
            self.path.pop()


def _hidden(el: etree._Element) -> bool:
    # A tab panel is hidden until its tab is clicked, but it is the text (a manual's command for
    # each system, sphinx-tabs): only its tab shows first.
    if el.get("role") == "tabpanel":
        return False
    return el.get("hidden") is not None or el.get("aria-hidden") == "true" or el.get("role") == "navigation"


def _text_box(names: str) -> bool:
    """A box of the text (a note, a tip, a DocBook sidebar), unless its class also names
    boilerplate ("cookie-warning")."""
    return not content.BOILER_NAMES.search(content.TEXT_BOX_NAMES.sub(" ", names))


def _name_hint(el: etree._Element, inherited: int) -> int:
    """-1 where the element's class names boilerplate (``content.ID_HINT`` where only its id does),
    +1 where its class or id names content; else the parent's."""
    cls, ident, role = el.get("class") or "", el.get("id") or "", el.get("role") or ""
    if not (cls + ident + role).strip():
        return inherited
    hint = _names_hint(cls, ident, role)
    if hint is None and el.tag in ("article", "main"):
        return 1
    return inherited if hint is None else hint


@functools.lru_cache(maxsize=4096)
def _names_hint(cls: str, ident: str, role: str) -> int | None:
    """``_name_hint`` for these names, None where they say nothing. Cached: a site repeats its
    class names on every element and page, and these are long case-blind searches."""
    names = f"{cls} {ident} {role}".strip()
    if content.BOILER_NAMES.search(names):
        return -1 if content.BOILER_NAMES.search(f"{cls} {role}") else content.ID_HINT
    if content.CONTENT_NAMES.search(names):
        return 1
    return None


def _trim(runs: list[Inline]) -> None:
    runs[0].text = runs[0].text.lstrip()
    runs[-1].text = runs[-1].text.rstrip()
