"""Videos in the containers mutagen does not read (Matroska and WebM, QuickTime, AVI, Flash video), by
their metadata, with hachoir's parsers.

As for songs (media.audio): the title is the container's title (else the file name), ``author`` the
artist tag, and the body one readable line per value, so any of them finds the file. hachoir reads the
container's headers and, for Matroska, its Tags element (artist, genre, dates, comment...), stepping
over the clusters of frames by their sizes: nothing is decoded.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Iterator

from .document import Document, clean
from deskdex.errors import CorruptFile
from .media import clock, put_fields
from .source import Source

# Matroska's tag names (its specification's TagName values, upper case) -> field (media.put_fields).
_MATROSKA_TAGS = {
    "ARTIST": "artist", "LEAD_PERFORMER": "artist", "DIRECTOR": "director", "GENRE": "genre",
    "DATE_RELEASED": "date", "DATE_RECORDED": "date", "COMMENT": "comment", "DESCRIPTION": "comment",
    "SUMMARY": "comment", "SYNOPSIS": "comment", "KEYWORDS": "keywords", "ALBUM": "album", "TITLE": "title",
    "COMPOSER": "composer",
}
_LINES = ("artist", "director", "album", "composer", "genre", "date", "keywords", "comment")
_MAX_TAGS = 1000  # SimpleTags read at most: a hostile file may hold millions
_MAX_VALUE = 4096


def convert(source: Source, mime: str) -> Document:
    from hachoir.core import config
    from hachoir.metadata import extractMetadata
    from hachoir.parser import guessParser
    from hachoir.stream import InputIOStream

    config.quiet = True  # hachoir prints its parsers' warnings on stderr otherwise
    fields: dict[str, list[str]] = {}
    with source.open() as f:
        try:
            parser = guessParser(InputIOStream(f, source=source.name, tags=[]))
            if parser is None:
                raise CorruptFile(f"not a video file hachoir can read ({mime})")
            meta = extractMetadata(parser)
            if parser.__class__.__name__ == "MkvFile":
                _matroska_tags(parser, fields)
        except CorruptFile:
            raise
        except Exception as exc:  # hachoir's parsers raise anything on broken bytes: the file's failure
            raise CorruptFile(f"unreadable video ({mime}): {type(exc).__name__}: {exc}") from exc
    doc = Document(uri=source.uri, mime=mime)
    title = _first(meta, "title") or "; ".join(fields.pop("title", []))
    put_fields(doc, fields, _LINES)
    duration = _first_value(meta, "duration")
    if isinstance(duration, dt.timedelta) and duration.total_seconds() > 0:
        doc.meta["duration"] = str(round(duration.total_seconds()))
        doc.add("p", f"Duration: {clock(duration.total_seconds())}")
    width, height = _first_value(meta, "width"), _first_value(meta, "height")
    if isinstance(width, int) and isinstance(height, int):
        doc.add("p", f"Video: {width}×{height}")
    created = _first_value(meta, "creation_date")
    if isinstance(created, dt.datetime) and created.year > 1904:  # QuickTime's zero is 1904-01-01
        doc.meta.setdefault("date", created.strftime("%Y-%m-%d %H:%M:%S"))
    doc.settle_title(title, source.name)
    return doc


def _matroska_tags(parser: Any, fields: dict[str, list[str]]) -> None:
    """The SimpleTags of the segment's Tags elements (usually at its end, after the clusters)."""
    count = 0
    for segment in _children(parser, "Segment["):
        for tags in _children(segment, "Tags["):
            for tag in _children(tags, "Tag["):
                for simple in _children(tag, "SimpleTag["):
                    count += 1
                    if count > _MAX_TAGS:
                        return
                    name = _text(simple, "TagName").upper()
                    value = clean(_text(simple, "TagString"))[:_MAX_VALUE]
                    field = _MATROSKA_TAGS.get(name)
                    if field and value and value not in fields.setdefault(field, []):
                        fields[field].append(value)


def _children(fieldset: Any, prefix: str) -> Iterator[Any]:
    for child in fieldset:
        if child.name.startswith(prefix) and child.is_field_set:
            yield child


def _text(simple: Any, name: str) -> str:
    for child in simple:
        if child.name == name and child.is_field_set:
            for leaf in child:
                if leaf.name == "unicode" or leaf.name == "string":
                    return str(leaf.value)
    return ""


def _first_value(meta: Any, key: str) -> object:
    if meta is None or not meta.has(key):
        return None
    return meta.get(key)


def _first(meta: Any, key: str) -> str:
    value = _first_value(meta, key)
    return clean(str(value))[:_MAX_VALUE] if value else ""
