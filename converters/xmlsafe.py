"""XML of the book and office formats (FictionBook, AbiWord, Gnumeric) parsed the one safe way.

No DTD is loaded, no entity expanded, nothing fetched from the network, and libxml2's limits on
huge documents stay on: an entity bomb or an external entity is refused or left unread, never
expanded. What libxml2 refuses as too deep or too large is HostileInput; anything else it cannot
read is CorruptFile.
"""

from __future__ import annotations

from lxml import etree

from deskdex.errors import CorruptFile, HostileInput

__all__ = ["local", "parse", "parser", "text_of"]


def parser(recover: bool = False) -> etree.XMLParser:
    """The safe parser (also markup.xml_text's); ``recover``: libxml2 reads on past damage."""
    # No DTD loading, no entity expansion, no network: the DTD is read but never acted on.
    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, dtd_validation=False,
                           huge_tree=False, remove_comments=True, remove_pis=True, recover=recover)


def parse(data: bytes, what: str) -> etree._Element:
    """The root element of ``data``; ``what`` names the file in errors ("FictionBook book")."""
    if not data.strip():
        raise CorruptFile(f"{what} is empty")
    try:
        root = etree.fromstring(data, parser())
    except etree.XMLSyntaxError as exc:
        why = str(exc).lower()
        if "depth" in why or "huge" in why or ("entit" in why and ("loop" in why or "amplification" in why)):
            raise HostileInput(f"{what}: {exc}") from exc
        raise CorruptFile(f"{what} is not well-formed XML: {exc}") from exc
    except ValueError as exc:  # lxml refuses some inputs (a str with a declaration) this way
        raise CorruptFile(f"{what} is not XML: {exc}") from exc
    if root is None:
        raise CorruptFile(f"{what} has no root element")
    return root


def local(tag: object) -> str:
    """An element's name without its namespace ("{http://...}section" -> "section"); "" for
    comments, processing instructions and entity references."""
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def text_of(el: etree._Element | None) -> str:
    """All the text under ``el``, whitespace collapsed; unexpanded entities count as nothing."""
    if el is None:
        return ""
    return " ".join("".join(t for t in el.itertext() if isinstance(t, str)).split())
