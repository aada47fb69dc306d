"""Images by their metadata (Pillow) and audio by its tags (mutagen), on files made here."""

from __future__ import annotations

import io
import os
import struct
import wave
from pathlib import Path

import pytest
from PIL import Image, features
from PIL.PngImagePlugin import PngInfo

from deskdex.converters import Source, convert
from deskdex.converters.detect import sniff
from deskdex.converters.document import Document
from deskdex.converters.tagged import dumps, loads

from .conftest import CLI

XMP = ('<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">'
       '<rdf:Description rdf:about="" xmlns:dc="http://purl.org/dc/elements/1.1/">'
       '<dc:title><rdf:Alt><rdf:li xml:lang="x-default">Harbour at dawn</rdf:li></rdf:Alt></dc:title>'
       '<dc:description><rdf:Alt><rdf:li xml:lang="x-default">Fishing boats leaving port</rdf:li></rdf:Alt>'
       '</dc:description><dc:subject><rdf:Bag><rdf:li>harbour</rdf:li><rdf:li>boats</rdf:li></rdf:Bag>'
       '</dc:subject></rdf:Description></rdf:RDF></x:xmpmeta>')


def one(path: Path) -> Document:
    outcomes = convert(Source.from_path(path))
    assert len(outcomes) == 1
    assert outcomes[0].ok, outcomes[0].message
    doc = outcomes[0].document
    assert loads(dumps(doc)).text() == doc.text()  # every result serialises as tagged text
    return doc


def camera_exif() -> Image.Exif:
    exif = Image.Exif()
    exif[0x010F] = "Canon"  # Make
    exif[0x0110] = "Canon EOS 5D"  # Model
    exif[0x010E] = "Sunset over the bay"  # ImageDescription
    exif[0x013B] = "Ansel Adams"  # Artist
    sub = exif.get_ifd(0x8769)
    sub[0x9003] = "2019:07:14 10:22:05"  # DateTimeOriginal
    sub[0x9286] = b"ASCII\x00\x00\x00holiday evening"  # UserComment
    return exif


def iptc_app13(keywords: list[str], caption: str) -> bytes:
    """A Photoshop APP13 segment holding IPTC records 2:25 (keywords) and 2:120 (caption)."""
    records = b"".join(b"\x1c\x02" + bytes([n]) + struct.pack(">H", len(v)) + v
                       for n, v in [(25, k.encode()) for k in keywords] + [(120, caption.encode())])
    block = b"8BIM\x04\x04\x00\x00" + struct.pack(">I", len(records)) + records + b"\x00" * (len(records) % 2)
    body = b"Photoshop 3.0\x00" + block
    return b"\xff\xed" + struct.pack(">H", len(body) + 2) + body


def test_jpeg_exif_xmp_iptc(tmp_path: Path) -> None:
    buf = io.BytesIO()
    Image.new("RGB", (32, 24), "red").save(buf, "JPEG", exif=camera_exif(), xmp=XMP.encode())
    data = buf.getvalue()
    p = tmp_path / "IMG_0001.jpg"
    p.write_bytes(data[:2] + iptc_app13(["beach", "holiday"], "Lighthouse in the fog") + data[2:])
    doc = one(p)
    assert doc.mime == "image/jpeg"
    assert doc.title == "Harbour at dawn"  # XMP dc:title
    text = doc.text()
    assert "Camera: Canon EOS 5D" in text
    assert "Taken: 2019-07-14 10:22:05" in text
    assert "Comment: holiday evening" in text
    assert "Lighthouse in the fog" in text and "Fishing boats leaving port" in text
    assert "Size: 32 x 24" in text
    assert doc.meta["author"] == "Ansel Adams"
    assert doc.meta["created"] == "2019-07-14T10:22:05"
    assert doc.meta["camera"] == "Canon EOS 5D"
    assert doc.meta["keywords"] == "harbour, boats, beach, holiday"


def test_broken_exif_leaves_the_rest(tmp_path: Path) -> None:
    buf = io.BytesIO()
    Image.new("RGB", (4, 4)).save(buf, "JPEG", xmp=XMP.encode())
    data = buf.getvalue()
    body = b"Exif\x00\x00MM\x00*\x00\x00\x00\x08\xff\xff" + b"\x01" * 30  # an IFD cut short
    p = tmp_path / "odd.jpg"
    p.write_bytes(data[:2] + b"\xff\xe1" + struct.pack(">H", len(body) + 2) + body + data[2:])
    doc = one(p)
    assert doc.title == "Harbour at dawn" and doc.meta["keywords"] == "harbour, boats"


def test_png_text_chunks_and_pixels_left_alone(tmp_path: Path) -> None:
    info = PngInfo()
    info.add_text("Title", "Garden plan")
    info.add_text("Author", "Gertrude Jekyll")
    info.add_itxt("Description", "Herbaceous border, ünïcode", zip=True)
    info.add_text("Comment", "drawn in spring")
    p = tmp_path / "plan.png"
    Image.new("RGB", (40, 30), "green").save(p, pnginfo=info)
    doc = one(p)
    assert doc.title == "Garden plan"
    assert doc.meta["author"] == "Gertrude Jekyll"
    assert "Description: Herbaceous border, ünïcode" in doc.text()
    assert "Comment: drawn in spring" in doc.text()
    assert doc.meta["dimensions"] == "40x30"
    # The pixels are never decoded: a PNG whose image data is garbage still gives its metadata.
    raw = p.read_bytes()
    at = raw.index(b"IDAT") + 8
    broken = tmp_path / "broken-pixels.png"
    broken.write_bytes(raw[:at] + b"\x00" * 8 + raw[at + 8:])
    assert one(broken).title == "Garden plan"


def test_tiff_webp_gif_bmp(tmp_path: Path) -> None:
    tif = tmp_path / "scan.tif"
    Image.new("RGB", (8, 8)).save(tif, exif=camera_exif())
    doc = one(tif)
    assert doc.mime == "image/tiff" and doc.title == "scan.tif"
    assert "Description: Sunset over the bay" in doc.text() and doc.meta["camera"] == "Canon EOS 5D"

    gif = tmp_path / "anim.gif"
    Image.new("P", (8, 8)).save(gif, comment=b"dancing cat")
    doc = one(gif)
    assert doc.mime == "image/gif" and "Comment: dancing cat" in doc.text()

    bmp = tmp_path / "icon.bmp"
    Image.new("RGB", (5, 7)).save(bmp)
    doc = one(bmp)  # no metadata: a document by its name, and its size
    assert doc.title == "icon.bmp" and doc.meta == {"dimensions": "5x7"}

    if not features.check("webp"):
        pytest.skip("this Pillow cannot write WebP")
    webp = tmp_path / "shot.webp"
    Image.new("RGB", (8, 8)).save(webp, exif=camera_exif(), xmp=XMP.encode())
    doc = one(webp)
    assert doc.mime == "image/webp" and doc.title == "Harbour at dawn"
    assert doc.meta["author"] == "Ansel Adams" and "boats" in doc.meta["keywords"]


def make_wav(path: Path, seconds: float = 0.5) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"\x00\x00" * int(8000 * seconds))


def id3_frames(title: str, artist: str, album: str) -> list[object]:
    from mutagen.id3 import COMM, TALB, TCON, TDRC, TIT2, TPE1

    return [TIT2(encoding=3, text=title), TPE1(encoding=3, text=artist), TALB(encoding=3, text=album),
            TCON(encoding=3, text="Jazz"), TDRC(encoding=3, text="1959"),
            COMM(encoding=3, lang="eng", desc="", text="modal improvisation")]


def test_wav_with_id3(tmp_path: Path) -> None:
    from mutagen.wave import WAVE

    p = tmp_path / "track01.wav"
    make_wav(p, 2.0)
    w = WAVE(p)
    w.add_tags()
    for frame in id3_frames("So What", "Miles Davis", "Kind of Blue"):
        w.tags.add(frame)
    w.save()
    doc = one(p)
    assert doc.mime == "audio/wav"
    assert doc.title == "So What"
    assert doc.meta["author"] == "Miles Davis"
    assert doc.meta["album"] == "Kind of Blue" and doc.meta["genre"] == "Jazz" and doc.meta["date"] == "1959"
    text = doc.text()
    assert "Album: Kind of Blue" in text and "Comment: modal improvisation" in text
    assert "Duration: 0:02" in text and doc.meta["duration"] == "2"


def test_untagged_wav_is_a_document_by_name(tmp_path: Path) -> None:
    p = tmp_path / "memo.wav"
    make_wav(p)
    doc = one(p)
    assert doc.title == "memo.wav" and "Audio: WAVE, 8000 Hz, 1 channel" in doc.text()


def test_mp3_with_id3(tmp_path: Path) -> None:
    from mutagen.mp3 import MP3

    # MPEG-1 layer III frames, 128 kbit/s at 44.1 kHz: 417 bytes each, silent (zero) payload.
    p = tmp_path / "song.mp3"
    p.write_bytes((b"\xff\xfb\x90\x64" + b"\x00" * 413) * 40)
    m = MP3(p)
    m.add_tags()
    for frame in id3_frames("Blue in Green", "Bill Evans", "Kind of Blue"):
        m.tags.add(frame)
    m.save()
    doc = one(p)
    assert doc.mime == "audio/mpeg" and doc.title == "Blue in Green"
    assert doc.meta["author"] == "Bill Evans" and "Genre: Jazz" in doc.text()
    assert sniff(p.read_bytes()[:64]) == "audio/mpeg"


def test_flac_vorbis_comments(tmp_path: Path) -> None:
    from mutagen.flac import FLAC

    rate, channels, bits, samples = 44100, 2, 16, 44100 * 3
    streaminfo = (struct.pack(">HH", 4096, 4096) + b"\x00" * 6
                  + struct.pack(">Q", rate << 44 | (channels - 1) << 41 | (bits - 1) << 36 | samples) + b"\x00" * 16)
    p = tmp_path / "prelude.flac"
    p.write_bytes(b"fLaC" + b"\x80" + len(streaminfo).to_bytes(3, "big") + streaminfo)
    f = FLAC(p)
    f["TITLE"] = "Cello Suite No. 1"
    f["ARTIST"] = "Pablo Casals"
    f["DATE"] = "1938"
    f["DESCRIPTION"] = "Abbey Road Studios"
    f["GENRE"] = "Baroque\x07\x00"  # what XML cannot hold is dropped
    f.save()
    doc = one(p)
    assert doc.mime == "audio/flac" and doc.title == "Cello Suite No. 1"
    assert doc.meta["author"] == "Pablo Casals" and doc.meta["duration"] == "3"
    assert "Comment: Abbey Road Studios" in doc.text() and "Date: 1938" in doc.text()
    assert doc.meta["genre"] == "Baroque"


def ogg_file(path: Path, head: bytes, tags: bytes, granule: int) -> None:
    from mutagen.ogg import OggPage

    pages = []
    for seq, packets, pos in ((0, [head], 0), (1, [tags], 0), (2, [b"\x00" * 16], granule)):
        page = OggPage()
        page.serial, page.sequence, page.position, page.packets = 7, seq, pos, packets
        page.first, page.last = seq == 0, seq == 2
        pages.append(page.write())
    path.write_bytes(b"".join(pages))


def vorbis_comment(**tags: str) -> bytes:
    from mutagen._vorbis import VComment

    vc = VComment()
    vc.vendor = "deskdex test"
    for k, v in tags.items():
        vc.append((k.upper(), v))
    return bytes(vc.write(framing=False))


def test_ogg_vorbis_and_opus(tmp_path: Path) -> None:
    ogg = tmp_path / "birds.ogg"
    ident = b"\x01vorbis" + struct.pack("<IBIiiiBB", 0, 2, 44100, 0, 128000, 0, 0xB8, 1)
    ogg_file(ogg, ident, b"\x03vorbis" + vorbis_comment(title="Dawn chorus", artist="Robin") + b"\x01", 44100 * 5)
    doc = one(ogg)
    assert doc.title == "Dawn chorus" and doc.meta["author"] == "Robin" and doc.meta["duration"] == "5"

    opus = tmp_path / "talk.opus"
    ident = b"OpusHead" + struct.pack("<BBHIhB", 1, 1, 0, 48000, 0, 0)
    ogg_file(opus, ident, b"OpusTags" + vorbis_comment(title="Keynote", album="Conference 2024"), 48000 * 65)
    doc = one(opus)
    assert doc.mime == "audio/opus" and doc.title == "Keynote"
    assert "Album: Conference 2024" in doc.text() and "Duration: 1:05" in doc.text()
    assert sniff(opus.read_bytes()[:64]) == "audio/opus"


def test_m4a_atoms(tmp_path: Path) -> None:
    from mutagen.mp4 import MP4

    def atom(name: bytes, body: bytes) -> bytes:
        return struct.pack(">I", 8 + len(body)) + name + body

    def full(name: bytes, body: bytes) -> bytes:
        return atom(name, b"\x00" * 4 + body)

    rate = 44100
    mp4a = atom(b"mp4a", b"\x00" * 6 + struct.pack(">H", 1) + b"\x00" * 8
                + struct.pack(">HHHHI", 2, 16, 0, 0, rate << 16) + atom(b"free", b""))
    mdia = atom(b"mdia", full(b"mdhd", struct.pack(">IIIIHH", 0, 0, rate, rate * 7, 0, 0))
                + full(b"hdlr", b"\x00" * 4 + b"soun" + b"\x00" * 13)
                + atom(b"minf", atom(b"stbl", full(b"stsd", struct.pack(">I", 1) + mp4a))))
    moov = atom(b"moov", full(b"mvhd", struct.pack(">IIII", 0, 0, 1000, 7000) + b"\x00" * 80)
                + atom(b"trak", mdia))
    p = tmp_path / "night.m4a"
    p.write_bytes(atom(b"ftyp", b"M4A \x00\x00\x00\x00M4A isom") + moov + atom(b"mdat", b"\x00" * 16))
    m = MP4(p)
    m["\xa9nam"], m["\xa9ART"], m["\xa9alb"], m["\xa9cmt"] = ["Night Train"], ["Oscar Peterson"], ["Trio"], ["live"]
    m.save()
    doc = one(p)
    assert doc.mime == "audio/mp4" and doc.title == "Night Train"
    assert doc.meta["author"] == "Oscar Peterson" and doc.meta["album"] == "Trio"
    assert "Comment: live" in doc.text() and doc.meta["duration"] == "7"
    assert sniff(p.read_bytes()[:64]) == "audio/mp4"


def test_aiff_with_id3(tmp_path: Path) -> None:
    from mutagen.aiff import AIFF

    rate, frames = 8000, 8000 * 4
    exponent = rate.bit_length() - 1  # the rate as an 80-bit IEEE extended float
    comm = struct.pack(">hIh", 1, frames, 16) + struct.pack(">HQ", 16383 + exponent, rate << (63 - exponent))
    ssnd = b"\x00" * (8 + frames * 2)
    body = b"AIFF" + b"COMM" + struct.pack(">I", len(comm)) + comm + b"SSND" + struct.pack(">I", len(ssnd)) + ssnd
    p = tmp_path / "harbour.aiff"
    p.write_bytes(b"FORM" + struct.pack(">I", len(body)) + body)
    a = AIFF(p)
    a.add_tags()
    for frame in id3_frames("Foghorn", "Harbour Master", "Sounds of the Sea"):
        a.tags.add(frame)
    a.save()
    doc = one(p)
    assert doc.mime == "audio/aiff" and doc.title == "Foghorn"
    assert doc.meta["author"] == "Harbour Master" and "Duration: 0:04" in doc.text()
    assert sniff(p.read_bytes()[:64]) == "audio/aiff"


def test_wma_asf(tmp_path: Path) -> None:
    import uuid

    from mutagen.asf import ASF

    # An ASF header object holding one file properties object (a play duration of 9 s).
    props = bytearray(80)
    props[40:64] = struct.pack("<QQQ", 9 * 10_000_000, 0, 0)
    fpo = uuid.UUID("8CABDCA1-A947-11CF-8EE4-00C00C205365").bytes_le + struct.pack("<Q", 24 + 80) + bytes(props)
    header = uuid.UUID("75B22630-668E-11CF-A6D9-00AA0062CE6C").bytes_le + struct.pack("<QIBB", 30 + len(fpo), 1, 1, 2)
    p = tmp_path / "rain.wma"
    p.write_bytes(header + fpo + b"\x00" * 50)
    a = ASF(p)
    a["Title"], a["Author"], a["WM/AlbumTitle"] = "Rain on the roof", "Field Recorder", "Weather"
    a.save()
    doc = one(p)
    assert doc.mime == "audio/x-ms-wma" and doc.title == "Rain on the roof"
    assert doc.meta["author"] == "Field Recorder" and "Album: Weather" in doc.text() and doc.meta["duration"] == "9"
    assert sniff(p.read_bytes()[:64]) == "video/x-ms-asf"


@pytest.mark.parametrize("name,data", [
    ("cut.jpg", b"\xff\xd8\xff\xe0\x00\x10JFIF"),
    ("cut.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00"),
    ("noise.mp3", b"\x01\x02\x03\x04" * 16),
    ("cut.flac", b"fLaC\x80\x00\x00\x22\x10\x00"),
    ("noise.ogg", b"OggS" + b"\x00" * 40),
])
def test_truncated_or_garbage_is_corrupt(tmp_path: Path, name: str, data: bytes) -> None:
    p = tmp_path / name
    p.write_bytes(data)
    outcomes = convert(Source.from_path(p))
    assert len(outcomes) == 1 and not outcomes[0].ok
    assert outcomes[0].reason == "corrupt", outcomes[0].message


def test_decompression_bomb_is_hostile(tmp_path: Path) -> None:
    # A PNG header claiming 100000 x 100000 pixels: refused before anything is decoded.
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    p = tmp_path / "bomb.png"
    p.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0))
                  + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b""))
    outcomes = convert(Source.from_path(p))
    assert outcomes[0].reason == "hostile", outcomes[0].message
    # A compressed text chunk that expands past Pillow's limit for one chunk.
    buf = io.BytesIO()
    Image.new("RGB", (4, 4)).save(buf, "PNG")
    raw = buf.getvalue()
    at = raw.index(b"IDAT") - 4
    p.write_bytes(raw[:at] + chunk(b"zTXt", b"Comment\x00\x00" + zlib.compress(b"a" * 20_000_000)) + raw[at:])
    outcomes = convert(Source.from_path(p))
    assert outcomes[0].reason == "hostile", outcomes[0].message


def test_photo_inside_a_zip(tmp_path: Path) -> None:
    import zipfile

    buf = io.BytesIO()
    Image.new("RGB", (4, 4)).save(buf, "JPEG", exif=camera_exif())
    p = tmp_path / "trip.zip"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("day1/beach.jpg", buf.getvalue())
    outcomes = convert(Source.from_path(p))
    assert [o.ok for o in outcomes] == [True, True]
    assert outcomes[1].uri.endswith("#day1/beach.jpg") and outcomes[1].document is not None
    assert outcomes[1].document.meta["camera"] == "Canon EOS 5D"


def test_sniffed_without_suffix() -> None:
    assert sniff(b"RIFF\x00\x00\x00\x00WAVEfmt ") == "audio/wav"
    assert sniff(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"
    assert sniff(b"II*\x00\x08\x00\x00\x00") == "image/tiff"
    assert sniff(b"fLaC\x00\x00\x00\x22") == "audio/flac"
    assert sniff(b"\x00\x00\x00\x20ftypM4A \x00\x00\x00\x00") == "audio/mp4"
    assert sniff(b"BMW and Audi compared, a long review of both.\n") == "text/plain"
    assert sniff(b"ID3 tags explained: a text file.\n") == "text/plain"


@pytest.mark.slow
def test_index_and_search_photos_and_music(cli: CLI, tmp_path: Path) -> None:
    import json

    from mutagen.wave import WAVE

    tree = tmp_path / "media"
    tree.mkdir()
    Image.new("RGB", (16, 16), "blue").save(tree / "DSC_0042.jpg", exif=camera_exif())
    song = tree / "take5.wav"
    make_wav(song)
    w = WAVE(song)
    w.add_tags()
    for frame in id3_frames("Take Five", "Dave Brubeck", "Time Out"):
        w.tags.add(frame)
    w.save()
    summary = json.loads(cli.run("index", str(tree), "--json").stdout)
    assert summary["indexed"] == 2 and summary["failed"] == 0

    def found(*words: str) -> list[str]:
        return [os.path.basename(h["path"]) for h in cli.json("search", *words)["hits"]]

    assert found("canon") == ["DSC_0042.jpg"]
    assert found("holiday") == ["DSC_0042.jpg"]
    assert found("brubeck") == ["take5.wav"]
    assert found("type:audio") == ["take5.wav"] and found("type:image") == ["DSC_0042.jpg"]
    hit = cli.json("search", "Take", "Five")["hits"][0]
    assert hit["title"] == "Take Five"
