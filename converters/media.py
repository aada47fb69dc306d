"""Photos, songs and videos by their metadata: tags with mutagen, image metadata with Pillow, and
the words in images by OCR (``imagetext``: Tesseract, after the metadata is read).

Neither decodes what it describes: mutagen reads the tag blocks and the stream header, and
Pillow's ``Image.open`` reads the header and the chunks before the pixels (a PNG's text
chunks after its image data are not read: that would decode the pixels). The Document's
title is the tag's title (else the file name), ``author`` the artist, and the body one
readable line per value ("Camera: Canon EOS 5D", "Keywords: beach, holiday"), so any of
them finds the file. A file with no metadata is still a Document, by its name.

Videos in containers mutagen does not read (Matroska, WebM, QuickTime, AVI, FLV): video.py.
"""

from __future__ import annotations

import struct
import warnings
from typing import Any, Callable, Iterable, Iterator

from .document import Document, clean
from deskdex.errors import CorruptFile, HostileInput
from .imagetext import add_text
from .source import Source

# Tag keys (lowercased) of ID3 frames, Vorbis comments, MP4 atoms, ASF and APEv2 items -> field.
_AUDIO_KEYS = {
    "tit2": "title", "title": "title", "\xa9nam": "title",
    "tpe1": "artist", "artist": "artist", "\xa9art": "artist", "author": "artist",
    "tpe2": "album artist", "albumartist": "album artist", "album artist": "album artist", "aart": "album artist",
    "wm/albumartist": "album artist",
    "talb": "album", "album": "album", "\xa9alb": "album", "wm/albumtitle": "album",
    "tcon": "genre", "genre": "genre", "\xa9gen": "genre", "wm/genre": "genre",
    "tdrc": "date", "tyer": "date", "date": "date", "year": "date", "\xa9day": "date", "wm/year": "date",
    "tcom": "composer", "composer": "composer", "\xa9wrt": "composer", "wm/composer": "composer",
    "comm": "comment", "comment": "comment", "\xa9cmt": "comment", "description": "comment", "desc": "comment",
}
# Body lines in this order; the title is the Document's title.
_AUDIO_LINES = ("artist", "album artist", "album", "composer", "genre", "date", "comment")
_AUDIO_META = {"artist": "author", "album": "album", "genre": "genre", "date": "date", "comment": "comments",
               "composer": "composer"}
_IMAGE_FORMATS = ("PNG", "JPEG", "TIFF", "GIF", "BMP", "DIB", "WEBP")
_MAX_VALUE = 4096  # characters kept of one tag value (a lyrics or comment field can be long)


def audio(source: Source, mime: str) -> Document:
    """Audio and video tags, duration and stream details, with mutagen."""
    import mutagen
    from mutagen import MutagenError

    with source.open() as f:
        try:
            mf = mutagen.File(f)
        except (MutagenError, ValueError, IndexError, KeyError, EOFError, OverflowError, struct.error) as exc:
            raise CorruptFile(f"unreadable {_kind(mime)}: {type(exc).__name__}: {exc}") from exc
    if mf is None:
        raise CorruptFile(f"not a {_kind(mime)} file mutagen can read")
    fields: dict[str, list[str]] = {}
    for key, values in _tag_items(mf.tags):
        field = _AUDIO_KEYS.get(key.lower().split(":", 1)[0])
        if field:
            for v in values:
                if v and v not in fields.setdefault(field, []):
                    fields[field].append(v)
    doc = Document(uri=source.uri, mime=mime)
    put_fields(doc, fields, _AUDIO_LINES)
    info = getattr(mf, "info", None)
    length = getattr(info, "length", None)
    if isinstance(length, (int, float)) and length > 0:
        doc.meta["duration"] = str(round(length))
        doc.add("p", f"Duration: {clock(length)}")
    details = []
    rate, channels = getattr(info, "sample_rate", None), getattr(info, "channels", None)
    if isinstance(rate, int) and rate > 0:
        details.append(f"{rate} Hz")
    if isinstance(channels, int) and channels > 0:
        details.append(f"{channels} channel{'s' if channels > 1 else ''}")
    bitrate = getattr(info, "bitrate", None)
    if isinstance(bitrate, int) and bitrate > 0:
        details.append(f"{bitrate // 1000} kbps")
    if details:
        doc.add("p", f"Audio: {type(mf).__name__}, {', '.join(details)}")
    doc.settle_title(" / ".join(fields.get("title", [])), source.name)
    return doc


def put_fields(doc: Document, fields: dict[str, list[str]], order: Iterable[str]) -> None:
    """One body line per field that has values, in ``order``; those of _AUDIO_META also as metadata."""
    for field in order:
        if fields.get(field):
            value = "; ".join(fields[field])
            doc.add("p", f"{field.capitalize()}: {value}")
            if field in _AUDIO_META:
                doc.meta[_AUDIO_META[field]] = value


def _tag_items(tags: Any) -> Iterator[tuple[str, list[str]]]:
    """(key, text values) of any of mutagen's tag containers; pictures and numbers left out."""
    if tags is None:
        return
    from mutagen.apev2 import APETextValue
    from mutagen.id3 import ID3

    if isinstance(tags, ID3):
        for frame in tags.values():  # type: ignore[no-untyped-call]  # an unannotated DictProxy
            if frame.FrameID == "TCON":
                yield "tcon", [_short(g) for g in frame.genres]
            elif frame.FrameID == "COMM" and frame.desc.startswith("iTun"):
                continue  # iTunes' normalisation and gapless numbers, not a comment
            elif hasattr(frame, "text"):
                yield frame.FrameID, [_short(str(t)) for t in frame.text]
        return
    try:
        keys = list(tags.keys())
    except (AttributeError, TypeError):
        return
    for key in keys:
        if not isinstance(key, str):
            continue
        try:
            raw = tags[key]
        except (KeyError, ValueError):
            continue
        values = raw if isinstance(raw, list) else [raw]
        texts: list[str] = []
        for v in values:
            if isinstance(v, APETextValue):  # NUL-separated values
                texts.extend(_short(t) for t in v)
                continue
            v = getattr(v, "value", v)  # ASF attributes
            if isinstance(v, str):
                texts.append(_short(v))
        yield key, texts


def image(source: Source, mime: str) -> Document:
    """EXIF, XMP, IPTC, PNG text chunks and the size of an image, with Pillow (the pixels not decoded
    for them), then the words in its pixels (OCR, ``imagetext``: what happens there never fails the file)."""
    from PIL import Image, UnidentifiedImageError

    with source.open() as f:
        try:
            with warnings.catch_warnings():
                # Pillow warns of corrupt EXIF and skips it, and of a large image, for decoding it:
                # only the header is read here. One past twice the limit (DecompressionBombError)
                # is refused.
                warnings.simplefilter("ignore")
                with Image.open(f, formats=_IMAGE_FORMATS) as im:
                    doc = _image_doc(im, source, mime)
                    add_text(im, doc)
        except Image.DecompressionBombError as exc:
            raise HostileInput(f"image too large to be real: {exc}") from exc
        except UnidentifiedImageError as exc:
            raise CorruptFile(f"not an image Pillow can read ({_kind(mime)})") from exc
        except ValueError as exc:
            if "too large" in str(exc).lower():  # a compressed PNG text chunk that expands too far
                raise HostileInput(f"image metadata too large: {exc}") from exc
            raise CorruptFile(f"unreadable {_kind(mime)}: {exc}") from exc
        except (OSError, SyntaxError, IndexError, KeyError, EOFError, OverflowError, struct.error) as exc:
            raise CorruptFile(f"unreadable {_kind(mime)}: {type(exc).__name__}: {exc}") from exc
    return doc


def _image_doc(im: Any, source: Source, mime: str) -> Document:
    found: dict[str, list[str]] = {}

    def put(field: str, values: Iterable[object]) -> None:
        for v in values:
            text = _text(v)
            if text and text not in found.setdefault(field, []):
                found[field].append(text)

    # Each source of metadata on its own: a broken EXIF block leaves the XMP and the rest readable.
    for read in (_exif, _xmp, _iptc, _text_chunks):
        try:
            read(im, put)
        except _BROKEN:
            pass
    doc = Document(uri=source.uri, mime=mime)
    title = " / ".join(found.pop("title", []))
    lines = (("camera", "Camera"), ("lens", "Lens"), ("taken", "Taken"), ("description", "Description"),
             ("comment", "Comment"), ("keywords", "Keywords"), ("artist", "Artist"),
             ("copyright", "Copyright"), ("software", "Software"))
    meta_of = {"camera": "camera", "description": "description", "keywords": "keywords", "artist": "author",
               "comment": "comments", "copyright": "copyright"}
    for field, label in lines:
        if values := found.pop(field, []):
            value = ", ".join(values) if field == "keywords" else "; ".join(values)
            doc.add("p", f"{label}: {value}")
            if field in meta_of:
                doc.meta[meta_of[field]] = value
            elif field == "taken":
                doc.meta["created"] = values[0].replace(" ", "T")
    for key, values in found.items():  # other PNG text chunks, by their own keyword
        doc.add("p", f"{key}: {'; '.join(values)}")
    w, h = im.size
    doc.add("p", f"Size: {w} x {h}")
    doc.meta["dimensions"] = f"{w}x{h}"
    doc.settle_title(title, source.name)
    return doc


_BROKEN = (ValueError, SyntaxError, LookupError, OSError, EOFError, OverflowError, struct.error)
_PNG_KEYS = {"title": "title", "description": "description", "author": "artist", "copyright": "copyright",
             "creation time": "taken", "software": "software", "comment": "comment", "keywords": "keywords"}


def _exif(im: Any, put: Callable[[str, Iterable[object]], None]) -> None:
    from PIL import ExifTags

    # A PNG's EXIF is read only when it came before the pixels (else Pillow would decode them).
    if im.format == "PNG" and "exif" not in im.info and "Raw profile type exif" not in im.info:
        return
    exif = im.getexif()
    if not exif:
        return
    base, sub = ExifTags.Base, exif.get_ifd(ExifTags.IFD.Exif)
    put("title", [_utf16(exif.get(0x9C9B))])  # XPTitle
    make, model = _text(exif.get(base.Make)), _text(exif.get(base.Model))
    if model and make and model.lower().startswith(make.lower().split()[0]):
        make = ""  # "Canon" and "Canon EOS 5D"
    put("camera", [" ".join(x for x in (make, model) if x)])
    put("lens", [sub.get(base.LensModel)])
    put("taken", [_exif_date(sub.get(base.DateTimeOriginal) or exif.get(base.DateTime))])
    put("description", [exif.get(base.ImageDescription), _utf16(exif.get(0x9C9F))])  # XPSubject
    put("comment", [_user_comment(sub.get(base.UserComment)), _utf16(exif.get(0x9C9C))])  # XPComment
    put("artist", [exif.get(base.Artist), _utf16(exif.get(0x9C9D))])  # XPAuthor
    put("keywords", _split(_utf16(exif.get(0x9C9E))))  # XPKeywords
    put("copyright", [exif.get(base.Copyright)])
    put("software", [exif.get(base.Software)])


def _xmp(im: Any, put: Callable[[str, Iterable[object]], None]) -> None:
    """Dublin Core from the XMP packet (Pillow parses it with defusedxml)."""
    xmp = im.getxmp()
    for key, field in (("title", "title"), ("description", "description"), ("subject", "keywords"),
                       ("creator", "artist"), ("rights", "copyright")):
        put(field, list(_xmp_values(xmp, key)))


def _iptc(im: Any, put: Callable[[str, Iterable[object]], None]) -> None:
    """IPTC records: JPEG's Photoshop block, TIFF's tag 33723."""
    from PIL import IptcImagePlugin

    if im.format not in ("JPEG", "MPO", "TIFF"):
        return
    iptc = IptcImagePlugin.getiptcinfo(im)
    if isinstance(iptc, dict):
        for record, field in (((2, 5), "title"), ((2, 105), "title"), ((2, 120), "description"),
                              ((2, 25), "keywords"), ((2, 80), "artist"), ((2, 116), "copyright")):
            v = iptc.get(record)
            put(field, v if isinstance(v, list) else [v])


def _text_chunks(im: Any, put: Callable[[str, Iterable[object]], None]) -> None:
    """PNG text chunks (tEXt, zTXt, iTXt) before the pixels; GIF and JPEG comments."""
    if im.format == "PNG":
        for key, value in im.info.items():
            if isinstance(value, str) and key != "XML:com.adobe.xmp" and not key.startswith("Raw profile type"):
                field = _PNG_KEYS.get(key.lower(), key)
                put(field, _split(value) if field == "keywords" else [value])
    elif isinstance(im.info.get("comment"), (bytes, str)):
        put("comment", [im.info["comment"]])


def _xmp_values(xmp: object, key: str) -> Iterator[str]:
    """The texts of every ``key`` property in Pillow's dictionary of the XMP packet."""
    if isinstance(xmp, dict):
        for k, v in xmp.items():
            if k == key:
                yield from _xmp_texts(v)
            else:
                yield from _xmp_values(v, key)
    elif isinstance(xmp, list):
        for v in xmp:
            yield from _xmp_values(v, key)


def _xmp_texts(v: object) -> Iterator[str]:
    if isinstance(v, str):
        yield v
    elif isinstance(v, list):
        for x in v:
            yield from _xmp_texts(x)
    elif isinstance(v, dict):
        if "text" in v:
            yield from _xmp_texts(v["text"])
        else:
            for k, x in v.items():
                if k not in ("lang", "about", "parseType", "resource"):
                    yield from _xmp_texts(x)


def _text(v: object) -> str:
    if isinstance(v, (bytes, bytearray)):
        raw = bytes(v)
        try:
            s = raw.decode("utf-8")
        except UnicodeDecodeError:
            s = raw.decode("latin-1")
    elif isinstance(v, str):
        s = v
    else:
        return ""
    return _short(" ".join(s.replace("\x00", " ").split()))


def _short(s: str) -> str:
    """A value as it goes into metadata: what XML cannot hold dropped, at most _MAX_VALUE characters."""
    return clean(s).strip()[:_MAX_VALUE]


def _utf16(v: object) -> str:
    """Windows' XP* tags: UTF-16LE bytes (Pillow may give them as a tuple of byte values)."""
    if isinstance(v, tuple) and all(isinstance(x, int) for x in v):
        v = bytes(x & 0xFF for x in v)
    if isinstance(v, (bytes, bytearray)):
        return _text(bytes(v).decode("utf-16-le", "replace").rstrip("\x00"))
    return ""


def _user_comment(v: object) -> str:
    """EXIF UserComment: an 8-byte character code ("ASCII\\0\\0\\0", "UNICODE\\0", "JIS") then text."""
    if isinstance(v, str):
        return _text(v)
    if not isinstance(v, (bytes, bytearray)):
        return ""
    code, body = bytes(v[:8]), bytes(v[8:])
    if code.startswith(b"UNICODE"):
        for enc in ("utf-16-be", "utf-16-le"):
            text = body.decode(enc, "replace")
            if text.isprintable():
                return _text(text)
        return _text(body.decode("utf-16-le", "replace"))
    if code.startswith((b"ASCII", b"\x00" * 8)):
        return _text(body)
    return _text(bytes(v))


def _exif_date(v: object) -> str:
    """EXIF's "2019:07:14 10:22:05" as "2019-07-14 10:22:05"."""
    s = _text(v)
    if len(s) >= 10 and s[4] == ":" and s[7] == ":":
        s = s[:4] + "-" + s[5:7] + "-" + s[8:]
    return "" if s.startswith("0000") else s


def _split(s: str) -> list[str]:
    return [k.strip() for k in s.replace(";", ",").split(",") if k.strip()]


def clock(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def _kind(mime: str) -> str:
    return mime.split("/", 1)[-1].removeprefix("x-").upper()
