"""Every format converts in enterprise mode as it does as root (issue 28): a file of each format
the registry converts here, owned by a real account (tests/accounts.py) in its home, converted by
a worker that gave up root for that account, the way the system daemon converts (the account's
credentials from daemon/accounts.py, a WorkerPool with the daemon's duplicate-features hook).

Its outcomes must be those of the same file converted as root, and the worker must not have
imported or opened anything of the interpreter, the venv or the checkout after the drop
(tests/privilege_probe.py): the account may not read them (a Python under a 0700 /root, a checkout
in a 0700 folder). Text with a UTF-8 BOM, UTF-16 and HTML in several encodings included: a BOM
failed "unknown encoding: utf-8-sig" before, its codec being nobody's alias.

Needs root (useradd, the drop) and the samples' tools (the Office 97 files are saved by LibreOffice,
the Outlook message comes from msg-parser's source archive, as in test_formats_legacy_ole.py)."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import pwd
import shutil
import struct
import subprocess
import tarfile
import uuid
import zipfile
from email.message import EmailMessage
from pathlib import Path
from typing import Iterator

import pytest

from deskdex.converters import Limits, Source
from deskdex.converters.convert import Outcome
from deskdex.converters.isolation import WorkerPool, release_fork_server
from deskdex.converters.registry import FORMATS_BASE
from deskdex.daemon import accounts as daemon_accounts

from .accounts import IS_ROOT, Users, missing_tools
from .conftest import CLI, DESKDEX, ROOT, make_docx, make_pdf
from .test_formats_books import ABW, FB2, GNUMERIC
from .test_formats_djvu import page as djvu_page
from .test_formats_dvi import typeset
from .test_formats_legacy_office import make_xls
from .test_formats_legacy_ole import office, outlook  # noqa: F401  (session fixtures used below)
from .test_formats_media import camera_exif, id3_frames, make_wav, ogg_file, vorbis_comment
from .test_formats_office import RTF, epub, odf
from .test_formats_postscript import EPS
from .test_formats_video import make_mkv

pytestmark = [pytest.mark.slow,  # an account, every format converted twice
              pytest.mark.skipif(not IS_ROOT, reason="needs root: useradd, a converter dropping to the account"),
              pytest.mark.skipif(bool(missing_tools()), reason="needs useradd, userdel (package passwd)")]

WORD = "quagmire"  # in every sample that has words of its own
HTML = f"<html><head><title>Harbour {WORD}</title></head><body><h1>Fleet</h1><p>The boats of the {WORD} returned.</p></body></html>"

# Directives and roles whose modules docutils loads on first use.
REST = (f"Harbour\n=======\n\n:Author: Jane Doe\n\nThe *{WORD}* returned, H\\ :sub:`2`\\ O.\n\n"
        ".. note:: Boats at anchor.\n\n.. code:: python\n\n   print('fleet')\n\n"
        ".. csv-table:: Fleet\n\n   boat, 3\n\n.. image:: boat.png\n\n.. contents::\n\n.. [1] A footnote.\n")


@pytest.fixture(scope="module")
def account() -> Iterator[pwd.struct_passwd]:
    users = Users()
    users.add(users.a)
    try:
        yield pwd.getpwnam(users.a)
    finally:
        users.remove()


def _samples(d: Path, office_dir: Path, outlook_dir: Path) -> dict[str, list[Path]]:
    """Format name (registry.FORMATS_BASE) -> sample files written into ``d``."""
    def put(name: str, data: bytes | str) -> Path:
        p = d / name
        p.write_bytes(data.encode() if isinstance(data, str) else data)
        return p

    def copy(src: Path, name: str) -> Path:
        shutil.copyfile(src, d / name)
        return d / name

    text = f"The {WORD} of the harbour.\n\nSecond paragraph, with words enough to be told a language by.\n"
    mail = EmailMessage()
    mail["Subject"], mail["From"], mail["To"] = f"Harbour {WORD}", "a@example.org", "b@example.org"
    mail.set_content(text)
    mail.add_attachment(text.encode(), maintype="text", subtype="plain", filename="notes.txt")
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w:gz") as t:
        info = tarfile.TarInfo("inner/notes.txt")
        info.size = len(text.encode())
        t.addfile(info, io.BytesIO(text.encode()))
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("notes.txt", text)
        z.writestr("page.html", HTML)
    odt = odf("text", f"<office:text><text:h text:outline-level='1'>Fleet</text:h><text:p>{text}</text:p></office:text>")
    ods = odf("spreadsheet", f"<office:spreadsheet><table:table table:name='S'><table:table-row><table:table-cell>"
                             f"<text:p>{WORD}</text:p></table:table-cell></table:table-row></table:table></office:spreadsheet>")
    odp = odf("presentation", f"<office:presentation><draw:page draw:name='p1'><draw:frame><draw:text-box>"
                              f"<text:p>{WORD} slide</text:p></draw:text-box></draw:frame></draw:page></office:presentation>")
    odg = odf("graphics", f"<office:drawing><draw:page draw:name='p1'><draw:frame><draw:text-box>"
                          f"<text:p>{WORD} drawing</text:p></draw:text-box></draw:frame></draw:page></office:drawing>")
    samples: dict[str, list[Path]] = {
        "Plain text": [put("bom.txt", b"\xef\xbb\xbf" + text.encode()), put("utf16.txt", text.encode("utf-16")),
                       put("utf16le.txt", text.encode("utf-16-le")), put("utf32.txt", text.encode("utf-32")),
                       put("cp1252.txt", f"Le café {WORD} était très élégant, à côté de la fenêtre.\n".encode("cp1252")),
                       put("koi8.txt", f"{WORD} Москва является столицей России, мы читали книгу.\n".encode("koi8_r")),
                       put("sjis.txt", f"{WORD} 東京は日本の首都です。私たちは昨日、公園を散歩しました。\n".encode("shift_jis")),
                       put("plain.txt", text)],
        "HTML": [put("bom.html", b"\xef\xbb\xbf" + HTML.encode()), put("utf16.html", HTML.encode("utf-16")),
                 put("koi8.html", HTML.replace("<head>", '<head><meta charset="koi8-r">').replace("boats", "лодки")
                     .encode("koi8_r")),
                 put("latin.xhtml", HTML.replace("<head>", '<head><meta http-equiv="Content-Type" '
                                                           'content="text/html; charset=iso-8859-15">')
                     .replace("boats", "bâteaux €").encode("iso-8859-15"))],
        "PDF": [make_pdf(d / "report.pdf", f"Report {WORD}", "Jane Doe", [text])],
        "Word (DOCX)": [_docx(d / "memo.docx", text)],
        "OpenDocument text": [put("notes.odt", odt)],
        "OpenDocument spreadsheet": [put("sheet.ods", ods)],
        "OpenDocument presentation": [put("slides.odp", odp)],
        "OpenDocument drawing": [put("drawing.odg", odg)],
        "RTF": [put("rapport.rtf", RTF)],
        "PowerPoint (PPTX)": [_pptx(d / "deck.pptx")],
        "Excel (XLSX)": [_xlsx(d / "book.xlsx")],
        "Excel 97-2003 (XLS)": [make_xls(d / "budget.xls")],
        "Word 97-2003 (DOC)": [copy(office_dir / "report.doc", "report.doc")],
        "PowerPoint 97-2003 (PPT)": [copy(office_dir / "slides.ppt", "slides.ppt")],
        "Outlook message (MSG)": [copy(outlook_dir / "outer.msg", "outer.msg")],
        "OLE compound file": [copy(office_dir / "report.doc", "word-without-suffix")],
        "EPUB": [put("road.epub", epub())],
        "PostScript": [put("label.eps", EPS), put("label.ps.gz", gzip.compress(EPS))],
        "DjVu": [djvu_page(d, "scan", f"okapi {WORD} page")],
        "DVI (TeX)": [typeset(d)],
        "FictionBook": [put("book.fb2", FB2.format(encoding="windows-1251").encode("windows-1251"))],
        "AbiWord": [put("doc.abw", ABW)],
        "Gnumeric": [put("sheet.gnumeric", gzip.compress(GNUMERIC.encode()))],
        "Markdown": [put("readme.md", f"# Harbour\n\nThe *{WORD}* returned.\n")],
        "reStructuredText": [put("notes.rst", REST)],
        "Source code": [put("tool.py", f"def {WORD}():\n    '''Count the boats.'''\n    return 42\n")],
        "CSV": [put("table.csv", f"name,count\n{WORD},3\n")],
        "TSV": [put("table.tsv", f"name\tcount\n{WORD}\t3\n")],
        "JSON": [put("data.json", f'{{"name": "{WORD}", "count": 3}}')],
        "XML": [put("feed.xml", f"<?xml version='1.0' encoding='ISO-8859-1'?><feed><title>{WORD} café</title></feed>"
                    .encode("iso-8859-1"))],
        "Manual page": [put("zebra.1", f'.TH ZEBRA 1\n.SH NAME\nzebra \\- the {WORD} report\n.SH DESCRIPTION\n'
                                       "Zebras graze on the savanna.\n")],
        "E-mail": [put("message.eml", mail.as_bytes())],
        "Mailbox": [put("inbox.mbox", b"From a@example.org Mon Jan  1 00:00:00 2024\n" + mail.as_bytes() + b"\n")],
        "ZIP": [put("bundle.zip", zipped.getvalue())],
        "TAR": [put("bundle.tar.gz", tar.getvalue())],
        "gzip": [put("notes.txt.gz", gzip.compress(text.encode()))],
        "bzip2": [put("notes.txt.bz2", bz2.compress(text.encode()))],
        "xz": [put("notes.txt.xz", lzma.compress(text.encode()))],
        "WARC": [_warc(d / "crawl.warc.gz")],
        "TREC": [put("bundle.trec", f"<DOC>\n<DOCNO>GX-1</DOCNO>\n<TEXT>{WORD} trec text</TEXT>\n</DOC>\n")],
        **_images(d),
        **_audio(d),
        **_video(d),
    }
    return samples


def _docx(path: Path, text: str) -> Path:
    return make_docx(path, f"Memo {WORD}", "Jane Doe", "Fleet", text.split("\n\n"), [["boat", "3"]])


def _pptx(path: Path) -> Path:
    import pptx

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = f"Harbour {WORD}"
    slide.placeholders[1].text = "boats returned"
    deck.save(str(path))
    return path


def _xlsx(path: Path) -> Path:
    import openpyxl

    wb = openpyxl.Workbook()
    wb.active.append(["name", "count"])
    wb.active.append([WORD, 3])
    wb.save(str(path))
    return path


def _warc(path: Path) -> Path:
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    with open(path, "wb") as f:
        w = WARCWriter(f, gzip=True)
        headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
        record = w.create_warc_record("http://example.org/harbour", "response", payload=io.BytesIO(HTML.encode()),
                                      http_headers=headers)
        w.write_record(record)
        record.raw_stream.close()
    return path


def _images(d: Path) -> dict[str, list[Path]]:
    from PIL import Image, ImageDraw, features

    def shot(name: str, **kw: object) -> Path:
        img = Image.new("RGB", (360, 80), "white")
        ImageDraw.Draw(img).text((10, 30), f"HARBOUR {WORD.upper()}", fill="black")
        img.save(d / name, **kw)
        return d / name

    out = {"JPEG image": [shot("photo.jpg", exif=camera_exif())], "PNG image": [shot("shot.png")],
           "TIFF image": [shot("scan.tif", exif=camera_exif())], "GIF image": [shot("anim.gif", comment=b"dancing cat")],
           "BMP image": [shot("icon.bmp")]}
    if features.check("webp"):
        out["WebP image"] = [shot("shot.webp", exif=camera_exif())]
    return out


def _audio(d: Path) -> dict[str, list[Path]]:
    from mutagen.asf import ASF
    from mutagen.flac import FLAC
    from mutagen.mp3 import MP3
    from mutagen.mp4 import MP4
    from mutagen.wave import WAVE

    def tag_id3(f: MP3 | WAVE) -> None:
        f.add_tags()
        for frame in id3_frames(f"So {WORD}", "Miles Davis", "Kind of Blue"):
            f.tags.add(frame)
        f.save()

    mp3 = d / "song.mp3"
    mp3.write_bytes((b"\xff\xfb\x90\x64" + b"\x00" * 413) * 40)
    tag_id3(MP3(mp3))
    wav = d / "track.wav"
    make_wav(wav)
    tag_id3(WAVE(wav))
    streaminfo = (struct.pack(">HH", 4096, 4096) + b"\x00" * 6
                  + struct.pack(">Q", 44100 << 44 | 1 << 41 | 15 << 36 | 44100) + b"\x00" * 16)
    flac = d / "prelude.flac"
    flac.write_bytes(b"fLaC" + b"\x80" + len(streaminfo).to_bytes(3, "big") + streaminfo)
    tags = FLAC(flac)
    tags["TITLE"] = f"Suite {WORD}"
    tags.save()
    ogg, opus = d / "birds.ogg", d / "talk.opus"
    ogg_file(ogg, b"\x01vorbis" + struct.pack("<IBIiiiBB", 0, 2, 44100, 0, 128000, 0, 0xB8, 1),
             b"\x03vorbis" + vorbis_comment(title=f"Dawn {WORD}") + b"\x01", 44100 * 5)
    ogg_file(opus, b"OpusHead" + struct.pack("<BBHIhB", 1, 1, 0, 48000, 0, 0),
             b"OpusTags" + vorbis_comment(title=f"Keynote {WORD}"), 48000 * 65)
    m4a, mp4 = d / "night.m4a", d / "clip.mp4"
    for path in (m4a, mp4):
        path.write_bytes(_mp4_atoms())
        m = MP4(path)
        m["\xa9nam"] = [f"Night {WORD}"]
        m.save()
    aiff = d / "harbour.aiff"
    aiff.write_bytes(_aiff())
    wma, wmv = d / "rain.wma", d / "rain.wmv"
    for path in (wma, wmv):
        path.write_bytes(_asf())
        a = ASF(path)
        a["Title"] = f"Rain {WORD}"
        a.save()
    return {"MP3 audio": [mp3], "FLAC audio": [flac], "Ogg audio": [ogg], "Opus audio": [opus],
            "MPEG-4 audio": [m4a], "MPEG-4 video": [mp4], "WAV audio": [wav], "AIFF audio": [aiff],
            "Windows Media audio": [wma], "Windows Media video": [wmv]}


def _atom(name: bytes, body: bytes) -> bytes:
    return struct.pack(">I", 8 + len(body)) + name + body


def _mp4_atoms(brand: bytes = b"M4A ") -> bytes:
    """An MPEG-4 file of one sound track 7 s long and no samples (as in test_formats_media.py)."""
    rate = 44100
    mp4a = _atom(b"mp4a", b"\x00" * 6 + struct.pack(">H", 1) + b"\x00" * 8
                 + struct.pack(">HHHHI", 2, 16, 0, 0, rate << 16) + _atom(b"free", b""))
    mdia = _atom(b"mdia", _atom(b"mdhd", b"\x00" * 4 + struct.pack(">IIIIHH", 0, 0, rate, rate * 7, 0, 0))
                 + _atom(b"hdlr", b"\x00" * 8 + b"soun" + b"\x00" * 13)
                 + _atom(b"minf", _atom(b"stbl", _atom(b"stsd", b"\x00" * 4 + struct.pack(">I", 1) + mp4a))))
    moov = _atom(b"moov", _atom(b"mvhd", b"\x00" * 4 + struct.pack(">IIII", 0, 0, 1000, 7000) + b"\x00" * 80)
                 + _atom(b"trak", mdia))
    return _atom(b"ftyp", brand + b"\x00\x00\x00\x00" + brand + b"isom") + moov + _atom(b"mdat", b"\x00" * 16)


def _aiff() -> bytes:
    rate, frames = 8000, 8000
    exponent = rate.bit_length() - 1
    comm = struct.pack(">hIh", 1, frames, 16) + struct.pack(">HQ", 16383 + exponent, rate << (63 - exponent))
    ssnd = b"\x00" * (8 + frames * 2)
    body = b"AIFF" + b"COMM" + struct.pack(">I", len(comm)) + comm + b"SSND" + struct.pack(">I", len(ssnd)) + ssnd
    return b"FORM" + struct.pack(">I", len(body)) + body


def _asf() -> bytes:
    props = bytearray(80)
    props[40:64] = struct.pack("<QQQ", 9 * 10_000_000, 0, 0)
    fpo = uuid.UUID("8CABDCA1-A947-11CF-8EE4-00C00C205365").bytes_le + struct.pack("<Q", 24 + 80) + bytes(props)
    header = uuid.UUID("75B22630-668E-11CF-A6D9-00AA0062CE6C").bytes_le + struct.pack("<QIBB", 30 + len(fpo), 1, 1, 2)
    return header + fpo + b"\x00" * 50


def _video(d: Path) -> dict[str, list[Path]]:
    """Matroska (and WebM, its subset) from mkvmerge; QuickTime, AVI and Flash video as minimal
    containers written here (no encoder is installed): enough for hachoir to read their headers."""
    mkv = make_mkv(d, "harbour.mkv", f"Harbour {WORD}")
    webm = d / "harbour.webm"
    shutil.copyfile(mkv, webm)
    mov = d / "clip.mov"
    mov.write_bytes(_mp4_atoms(b"qt  "))
    avih = struct.pack("<14I", 40000, 0, 0, 0, 25, 0, 1, 0, 320, 240, 0, 0, 0, 0)
    hdrl = b"hdrl" + b"avih" + struct.pack("<I", len(avih)) + avih
    info = b"INFO" + b"INAM" + struct.pack("<I", 10) + f"Clip {WORD[:4]}\0".encode()
    body = b"AVI " + b"LIST" + struct.pack("<I", len(hdrl)) + hdrl + b"LIST" + struct.pack("<I", len(info)) + info
    avi = d / "clip.avi"
    avi.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    flv = d / "clip.flv"
    flv.write_bytes(b"FLV\x01\x05" + struct.pack(">I", 9) + b"\x00\x00\x00\x00")
    return {"Matroska video": [mkv], "WebM video": [webm], "QuickTime video": [mov], "AVI video": [avi],
            "Flash video": [flv]}


def _own(folder: Path, who: pwd.struct_passwd) -> None:
    """The account owns its samples, readable by it alone, in its home (0700 or 0750 as made)."""
    for p in folder.iterdir():
        os.chown(p, who.pw_uid, who.pw_gid)
        p.chmod(0o600)


def _converted(paths: list[Path], run_as: object) -> dict[str, list[Outcome]]:
    sources = [Source.from_path(str(p), run_as=run_as) for p in paths]  # type: ignore[arg-type]
    # A generous time limit: on a loaded shared machine a big sample took over 120 s as root, and
    # what is checked here is the drop, not the limit.
    with WorkerPool(2, Limits(time_seconds=600.0), idle=False, enrich="tests.privilege_probe:enrich") as pool:
        return {s.name: outs for s, outs in pool.map(sources)}


def _view(outs: list[Outcome]) -> list[tuple[str, str, str, str]]:
    return [(o.uri.rsplit("/", 1)[-1], o.reason, o.message, o.document.text() if o.document else "") for o in outs]


def test_every_format_converts_as_the_files_owner_as_it_does_as_root(
        account: pwd.struct_passwd, office: Path, outlook: Path, tmp_path: Path) -> None:  # noqa: F811
    home = Path(account.pw_dir)
    folder = home / "samples"
    folder.mkdir()
    os.chown(folder, account.pw_uid, account.pw_gid)
    by_format = _samples(folder, office, outlook)
    here = {f.name for f in FORMATS_BASE if not f.missing()}
    assert sorted(here - set(by_format)) == [], "a format converted here has no sample in this test"
    # Scratch files the sample tools left (tex's .log, mkvmerge's inputs) are not samples.
    samples = sorted({p for paths in by_format.values() for p in paths})
    for p in folder.iterdir():
        if p not in samples:
            p.unlink()
    _own(folder, account)
    owner = daemon_accounts.configured([account.pw_name])[0].run_as  # the system daemon's credentials
    release_fork_server()  # a fork server of this test's: it preloads the probe's audit hook
    try:
        as_root = _converted(samples, None)
        as_owner = _converted(samples, owner)
    finally:
        release_fork_server()
    late = {name: outs[0].extra.get("late") for name, outs in as_owner.items() if outs and outs[0].extra.get("late")}
    everything = sorted({item for items in late.values() for item in items})
    assert late == {}, f"imported or opened after the drop to the account (unreadable to it where the tree is private): {everything}"
    for name in sorted(as_root):
        root_view = _view(as_root[name])
        assert root_view[0][1] == "" and root_view[0][3], f"{name} as root: {root_view[0]}"
        assert _view(as_owner[name]) == root_view, name
    with_word = [n for n, outs in as_owner.items() if any(o.document and WORD in o.document.text() for o in outs)]
    assert {"bom.txt", "bom.html", "utf16.txt", "utf16.html", "koi8.html", "sjis.txt"} <= set(with_word)


def test_the_system_daemon_indexes_bom_and_utf16_files_of_an_account(account: pwd.struct_passwd,
                                                                     open_dir: Path) -> None:
    """The same through the daemon itself: `deskdex daemon --system --once` over the account's home,
    then a search of the index it made."""
    folder = Path(account.pw_dir) / "encodings"
    folder.mkdir()
    os.chown(folder, account.pw_uid, account.pw_gid)
    text = f"The {WORD} of the harbour, in a file of its own.\n"
    (folder / "bom.txt").write_bytes(b"\xef\xbb\xbf" + text.encode())
    (folder / "utf16.txt").write_bytes(text.encode("utf-16"))
    (folder / "bom.html").write_bytes(b"\xef\xbb\xbf" + HTML.encode())
    _own(folder, account)
    home = open_dir / "system-home"
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.toml").write_text(f'accounts = ["{account.pw_name}"]\n')
    p = subprocess.run([DESKDEX, "--home", str(home), "daemon", "--system", "--once"], capture_output=True,
                       text=True, timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    found = CLI(home).json("search", WORD, "--limit", "50", "--all")  # bom.txt and utf16.txt: copies
    assert {h["path"].rsplit("/", 1)[-1] for h in found["hits"]} >= {"bom.txt", "utf16.txt", "bom.html"}, found
    failures = CLI(home).run("status", "--failures").stdout
    assert "encoding" not in failures and "converter_bug" not in failures, failures
