"""Word and PowerPoint 97-2003 files and Outlook messages: converted with their properties, found
by content under a wrong suffix, and refused as ``encrypted``, ``corrupt`` or ``helper_missing``.

Real files only. The .doc and .ppt files are saved by LibreOffice from HTML and flat ODP written
here (one soffice call per format for the whole session); password-protected .doc and .xls are
saved by LibreOffice driven through python3-uno (tests/lo_password.py). Files no tool here writes,
real Outlook messages and a password-protected .ppt, come from two packages' source archives on
PyPI (msg-parser's and oletools' test files), fetched once into a cache folder with pip; those
tests skip, saying so, when the registry cannot be reached.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from deskdex.converters import Source, convert
from deskdex.converters.document import Document
from deskdex.converters.msg import convert as convert_msg
from deskdex.converters.registry import Member

from .conftest import CLI, DESKDEX

pytestmark = pytest.mark.slow  # LibreOffice makes the files

HERE = Path(__file__).resolve().parent

REPORT_HTML = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>Zebra Migration Report</title>
<meta name="author" content="Jane Doe"><meta name="keywords" content="zebras, savanna"></head>
<body><h1>Findings</h1><p>The zebras crossed the Mara river in late July.</p>
<p>The herd of striped zebras grazed near the okapi enclosure.</p>
<ul><li>First bullet about wildebeest</li><li>Second bullet about gazelles</li></ul>
<table><tr><td>Herd</td><td>Count</td></tr><tr><td>North</td><td>1200</td></tr></table>
<p>Closing words in a rather long paragraph, so that antiword finds enough text to read this
document at all: it refuses documents whose text is short.</p></body></html>"""
NOTE_HTML = "<html><head><title>Tiny</title></head><body><p>Marmoset memo</p></body></html>"
SLIDES_FODP = """<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
 xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"
 xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0"
 xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0"
 xmlns:dc="http://purl.org/dc/elements/1.1/" office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.presentation">
<office:meta><dc:title>Quarterly Pangolin Review</dc:title><meta:initial-creator>Pat Lee</meta:initial-creator></office:meta>
<office:body><office:presentation><draw:page draw:name="p1">
<draw:frame presentation:class="title" svg:x="2cm" svg:y="2cm" svg:width="20cm" svg:height="3cm"><draw:text-box><text:p>Pangolin numbers</text:p></draw:text-box></draw:frame>
</draw:page></office:presentation></office:body></office:document>"""


def converted(path: Path) -> tuple[bool, str, Document | None]:
    outcome = convert(Source.from_path(path))[0]
    return outcome.ok, outcome.reason or "", outcome.document


def _soffice(args: list[str], profile: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["soffice", "--headless", "--norestore", f"-env:UserInstallation=file://{profile}", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.fixture(scope="session")
def office(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """report.doc, note.doc and slides.ppt, saved by LibreOffice."""
    for program in ("soffice", "antiword", "catdoc", "catppt"):
        if shutil.which(program) is None:
            pytest.skip(f"{program} is not installed (packaging/system-deps.sh installs it)")
    d = tmp_path_factory.mktemp("office")
    (d / "report.html").write_text(REPORT_HTML, encoding="utf-8")
    (d / "note.html").write_text(NOTE_HTML, encoding="utf-8")
    (d / "slides.fodp").write_text(SLIDES_FODP, encoding="utf-8")
    out = d / "out"
    # One after the other, sharing a profile: LibreOffice's first start in a new profile is its slow part.
    runs = [["--infilter=HTML (StarWriter)", "--convert-to", "doc:MS Word 97", "--outdir", str(out),
             str(d / "report.html"), str(d / "note.html")],
            ["--convert-to", "ppt", "--outdir", str(out), str(d / "slides.fodp")]]
    codes = []
    for args in runs:
        run = _soffice(args, d / "profile")
        try:
            codes.append(run.wait(180))
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
    assert codes == [0, 0] and all((out / n).is_file() for n in ("report.doc", "note.doc", "slides.ppt")), codes
    return out


def _sdist(spec: str) -> Path:
    """A package's source archive from PyPI, kept in a cache folder between runs."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "deskdex-tests" / "sdists"
    name, _, version = spec.partition("==")
    stem = f"{name.replace('-', '_')}-{version}"
    found = [p for p in cache.glob(f"{stem}.*") if p.suffix in (".gz", ".zip")] if cache.is_dir() else []
    if found:
        return found[0]
    cache.mkdir(parents=True, exist_ok=True)
    p = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:", spec,
                        "-d", str(cache)], capture_output=True, text=True, timeout=600)
    found = [p for p in cache.glob(f"{stem}.*") if p.suffix in (".gz", ".zip")]
    if p.returncode != 0 or not found:
        last = (p.stderr.strip().splitlines() or ["no archive"])[-1]
        pytest.skip(f"cannot fetch the {spec} source archive from PyPI (its test files are needed): {last}")
    return found[0]


def _members(archive: Path, wanted: dict[str, str], dest: Path) -> Path:
    """Copy ``wanted`` (path in the archive -> file name) out of a .tar.gz or .zip into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as zf:
            for inner, name in wanted.items():
                (dest / name).write_bytes(zf.read(inner))
    else:
        with tarfile.open(archive) as tf:
            for inner, name in wanted.items():
                f = tf.extractfile(inner)
                assert f is not None
                (dest / name).write_bytes(f.read())
    return dest


@pytest.fixture(scope="session")
def outlook(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three Outlook messages from msg-parser's tests: an attached message, a Chinese bounce
    with an attached message, and one with ten attachments (files and messages)."""
    files = "msg_parser-1.2.0/tests/files/"
    return _members(_sdist("msg-parser==1.2.0"), {files + n: n for n in ("outer.msg", "other.msg", "complete.msg")},
                    tmp_path_factory.mktemp("outlook"))


@pytest.fixture(scope="session")
def oletools_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Files saved by Microsoft Office, from oletools' tests: password-protected .doc, .xls and
    .ppt, a plain Word document, a presentation with a Korean author name, a workbook."""
    data = "oletools-0.60.2/tests/test-data/"
    return _members(_sdist("oletools==0.60.2"), {
        data + "encrypted/encrypted.doc": "locked.doc", data + "encrypted/encrypted.xls": "locked.xls",
        data + "encrypted/encrypted.ppt": "locked.ppt", data + "msodde/harmless-clean.doc": "harmless.doc",
        data + "olevba/sample_with_vba.ppt": "korean.ppt", data + "excel4-macros/excel4_sample_macro.xls": "macro.xls"},
        tmp_path_factory.mktemp("oletools"))


def test_doc_title_metadata_paragraphs_lists_and_tables(office: Path) -> None:
    ok, reason, doc = converted(office / "report.doc")
    assert ok, reason
    assert doc is not None and doc.mime == "application/msword"
    assert doc.title == "Zebra Migration Report"  # the document properties' title
    assert doc.meta["author"] == "Jane Doe" and doc.meta["keywords"] == "zebras, savanna"
    blocks = [(b.kind, b.text) for b in doc.blocks]
    assert ("p", "The herd of striped zebras grazed near the okapi enclosure.") in blocks
    assert [t for k, t in blocks if k == "td"] == ["Herd", "Count", "North", "1200"]
    assert "First bullet about wildebeest" in doc.text()


def test_short_doc_antiword_refuses_is_read_by_catdoc(office: Path) -> None:
    # antiword's own refusal, which made catdoc the fallback (converters/doc.py)
    assert subprocess.run(["antiword", str(office / "note.doc")], capture_output=True).returncode != 0
    ok, reason, doc = converted(office / "note.doc")
    assert ok, reason
    assert doc is not None and doc.title == "Tiny" and "Marmoset memo" in doc.body_text()


def test_ppt_and_pps_title_and_author(office: Path, tmp_path: Path) -> None:
    shutil.copy(office / "slides.ppt", tmp_path / "slides.pps")
    for path in (office / "slides.ppt", tmp_path / "slides.pps"):
        ok, reason, doc = converted(path)
        assert ok, reason
        assert doc is not None and doc.mime == "application/vnd.ms-powerpoint"
        assert doc.title == "Quarterly Pangolin Review" and doc.meta["author"] == "Pat Lee"
    # LibreOffice keeps slide text inside drawing shapes, which catppt does not read (ppt.py).


def test_office_files_saved_by_microsoft_office(oletools_files: Path) -> None:
    ok, reason, doc = converted(oletools_files / "harmless.doc")
    assert ok, reason
    assert doc is not None and "This is a harmless test document." in doc.body_text()
    assert doc.meta["author"] == "user" and doc.meta["created"] == "2017-10-26T09:09:00"
    ok, reason, doc = converted(oletools_files / "korean.ppt")
    assert ok, reason
    # SummaryInformation in code page 949, the slide master's name from catppt
    assert doc is not None and doc.title == "PPT VBA TEST" and doc.meta["author"] == "김 기정"
    assert [(b.kind, b.text) for b in doc.blocks] == [("h", "Office 테마")]
    ok, reason, doc = converted(oletools_files / "macro.xls")
    assert ok, reason
    # the author from SummaryInformation, the last user from the workbook's WRITEACCESS record
    assert doc is not None and doc.meta["author"] == "user" and doc.meta["modified_by"] == "Philippe Lagadec"
    assert doc.meta["created"] == "2019-01-20T07:17:53" and doc.title == "macro.xls"


def test_ole_files_found_by_content_under_a_wrong_suffix_or_none(office: Path, tmp_path: Path) -> None:
    for name in ("report", "report.xls", "report.ppt", "report.msg", "report.docx"):
        shutil.copy(office / "report.doc", tmp_path / name)
        ok, reason, doc = converted(tmp_path / name)
        assert ok, (name, reason)
        assert doc is not None and doc.mime == "application/msword" and doc.title == "Zebra Migration Report", name
    # Text under these suffixes (LaTeX's .doc, Tcl's .msg catalogues, gettext's .pot) stays text.
    for name in ("seminar.doc", "fr.msg", "messages.pot"):
        (tmp_path / name).write_text("plain words of a text file\n")
        ok, reason, doc = converted(tmp_path / name)
        assert ok and doc is not None and doc.mime == "text/plain", (name, reason)


def test_truncated_and_garbage_files_are_corrupt(office: Path, tmp_path: Path) -> None:
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
    for suffix, good in (("doc", office / "report.doc"), ("ppt", office / "slides.ppt")):
        data = good.read_bytes()
        (tmp_path / f"cut.{suffix}").write_bytes(data[:3000])
        (tmp_path / f"junk.{suffix}").write_bytes(ole + bytes(range(256)) * 40)
        # the container intact, the Word or PowerPoint stream's bytes scrambled
        body = bytearray(data)
        body[2048:] = bytes((b * 7 + 3) % 256 for b in body[2048:])
        (tmp_path / f"scrambled.{suffix}").write_bytes(bytes(body))
        for name in (f"cut.{suffix}", f"junk.{suffix}", f"scrambled.{suffix}"):
            assert converted(tmp_path / name)[:2] == (False, "corrupt"), name
    (tmp_path / "junk.msg").write_bytes(ole + bytes(range(256)) * 40)
    assert converted(tmp_path / "junk.msg")[:2] == (False, "corrupt")


@pytest.mark.timeout(30)
def test_a_damaged_property_vector_costs_that_property_only(office: Path, tmp_path: Path) -> None:
    import olefile

    # The title property (id 2) retyped as a vector of 2**32 - 16 empty values: olefile
    # 0.47 alone loops over them until memory runs out (converters/ole.py).
    path = tmp_path / "vector.doc"
    shutil.copy(office / "report.doc", path)
    with olefile.OleFileIO(str(path), write_mode=True) as ole:
        props = bytearray(ole.openstream("\x05SummaryInformation").read())
        section = struct.unpack_from("<I", props, 44)[0]
        count = struct.unpack_from("<I", props, section + 4)[0]
        offsets = dict(struct.unpack_from("<II", props, section + 8 + 8 * i) for i in range(count))
        struct.pack_into("<II", props, section + offsets[2], 0x1000, 0xFFFFFFF0)
        ole.write_stream("\x05SummaryInformation", bytes(props))
    started = time.monotonic()
    ok, reason, doc = converted(path)
    # olefile catches BaseException around each property, pytest-timeout's too: time it here.
    assert time.monotonic() - started < 10
    assert ok, reason
    assert doc is not None and doc.title == "vector.doc" and doc.meta["author"] == "Jane Doe"


def test_missing_helpers_fail_as_helper_missing_naming_the_package(office: Path, tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    env = dict(os.environ, PATH=str(empty), DESKDEX_HOME=str(tmp_path / "home"), NO_COLOR="1")
    for name, install in (("report.doc", "apt-get install antiword catdoc"), ("slides.ppt", "apt-get install catdoc")):
        p = subprocess.run([DESKDEX, "convert", str(office / name)], capture_output=True, text=True, env=env,
                           timeout=120)
        assert p.returncode != 0 and "(helper_missing)" in p.stderr and install in p.stderr, p.stderr
    formats = subprocess.run([DESKDEX, "formats"], capture_output=True, text=True, env=env, timeout=120).stdout
    assert "apt-get install antiword catdoc" in formats


@pytest.fixture(scope="session")
def locked_by_libreoffice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    python3 = shutil.which("python3", path="/usr/bin:/bin")
    if shutil.which("soffice") is None or python3 is None:
        pytest.skip("LibreOffice or the system's python3 is not installed")
    if subprocess.run([python3, "-c", "import uno"], capture_output=True).returncode != 0:
        pytest.skip("python3-uno is not installed: LibreOffice is driven through it to set a password")
    out = tmp_path_factory.mktemp("locked")
    subprocess.run([python3, str(HERE / "lo_password.py"), str(out), "hunter2"], check=True, timeout=300,
                   capture_output=True)
    return out


def test_password_protected_doc_and_xls_saved_by_libreoffice_are_encrypted(locked_by_libreoffice: Path) -> None:
    for name in ("locked.doc", "locked.xls"):
        assert converted(locked_by_libreoffice / name)[:2] == (False, "encrypted"), name


def test_password_protected_doc_xls_ppt_saved_by_office_are_encrypted(oletools_files: Path, tmp_path: Path) -> None:
    for name in ("locked.doc", "locked.xls", "locked.ppt"):
        assert converted(oletools_files / name)[:2] == (False, "encrypted"), name
        shutil.copy(oletools_files / name, tmp_path / name.replace(".", "-"))  # found by content
        assert converted(tmp_path / name.replace(".", "-"))[:2] == (False, "encrypted"), name


def test_msg_subject_headers_body_and_attached_message(outlook: Path) -> None:
    outcomes = convert(Source.from_path(outlook / "outer.msg"))
    assert [o.reason for o in outcomes] == ["", ""]
    parent, child = (o.document for o in outcomes)
    assert parent is not None and child is not None
    assert parent.mime == "application/vnd.ms-outlook" and parent.title == "outer subject"
    assert parent.meta["to"] == "outer@foo.bar <outer@foo.bar>" and parent.body_text() == "Outer body"
    assert child.uri.endswith("/outer.msg#message-1.msg") and child.title == "test" and child.body_text() == "body"
    ok, reason, doc = converted(outlook / "other.msg")
    assert ok, reason
    assert doc is not None and doc.title == "投递状态通知 (Failure Notice)"
    assert doc.meta["from"] == "Mail Delivery Subsystem <mailer-daemon@tjdpf.org.cn>"
    assert doc.meta["date"] == "2017-11-27T09:44:30+00:00"
    assert "The recipients is locked." in doc.body_text()


def test_msg_attachments_are_members(outlook: Path) -> None:
    items = list(convert_msg(Source.from_path(outlook / "complete.msg"), "application/vnd.ms-outlook"))
    parent, members = items[0], items[1:]
    assert isinstance(parent, Document) and parent.title == "Test Multiple attachments complete email!!"
    assert all(isinstance(m, Member) and m.error is None for m in members)
    names = [m.source.name for m in members if isinstance(m, Member)]
    assert names == [f"message-{n}.msg" for n in range(1, 7)] + [
        "[MS-OXPROPS]-181001.docx", "[MS-OXPROPS].txt", "[MS-OXPROPS].pdf", "hugues-de-buyer-mimeure-313867-unsplash.jpg"]
    txt = next(m for m in members if isinstance(m, Member) and m.source.name.endswith(".txt"))
    assert txt.source.uri.endswith("/complete.msg#%5BMS-OXPROPS%5D.txt") and txt.source.mime == "text/plain"
    first = next(m for m in members if isinstance(m, Member))
    assert convert(first.source)[0].document is not None  # an attached message converts in its turn


def test_index_and_search_doc_and_msg(cli: CLI, office: Path, outlook: Path, tmp_path: Path) -> None:
    tree = tmp_path / "old-office"
    tree.mkdir()
    shutil.copy(office / "report.doc", tree)
    shutil.copy(outlook / "outer.msg", tree)
    summary = json.loads(cli.run("index", str(tree), "--json").stdout)
    assert summary["failed"] == 0, summary
    hits = cli.json("search", "okapi")["hits"]
    assert [os.path.basename(h["path"]) for h in hits] == ["report.doc"]
    assert hits[0]["title"] == "Zebra Migration Report"
    assert {h["title"] for h in cli.json("search", "body")["hits"]} >= {"test"}
