"""Mail and compound formats: EML, MBOX, ZIP, TAR (plain and compressed), gzip/bzip2/xz,
WARC and TREC, each member a child document whose URI points inside its parent."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import random
import tarfile
import zipfile
from email.message import EmailMessage
from pathlib import Path

import pytest

from deskdex.converters import Source, convert
from deskdex.converters.convert import Outcome
from deskdex.errors import Encrypted
from deskdex.converters.tagged import dumps, loads
from deskdex.converters.zipcheck import read_member

from .conftest import need_corpus

MARKDOWN = b"# Harbour Report\n\nThe *fishing fleet* returned at dawn.\n"


def by_uri(path: Path) -> dict[str, Outcome]:
    outcomes = convert(Source.from_path(path))
    assert outcomes[0].uri == Source.from_path(path).uri
    for o in outcomes:
        if o.ok:
            assert loads(dumps(o.document)).text() == o.document.text()
    return {o.uri: o for o in outcomes}


def message(subject: str, body: str, attachment: tuple[str, bytes] | None = None) -> EmailMessage:
    m = EmailMessage()
    m["From"] = "Ann Author <ann@example.org>"
    m["To"] = "Bob Reader <bob@example.org>"
    m["Subject"] = subject
    m["Date"] = "Tue, 01 Feb 2022 10:00:00 +0000"
    m.set_content(body)
    if attachment:
        m.add_attachment(attachment[1], maintype="text", subtype="markdown", filename=attachment[0])
    return m


def test_eml_with_attachment_and_html_alternative(tmp_path: Path) -> None:
    m = message("Quarterly numbers", "Hello Bob,\n\nThe numbers are in the attachment.\n", ("report.md", MARKDOWN))
    m.get_body().add_alternative("<p>Hello <b>Bob</b></p>", subtype="html")  # type: ignore[union-attr]
    p = tmp_path / "note.eml"
    p.write_bytes(bytes(m))
    out = by_uri(p)
    doc = out[Source.from_path(p).uri].document
    assert doc is not None and doc.mime == "message/rfc822"
    assert doc.title == "Quarterly numbers"
    assert doc.meta["from"] == "Ann Author <ann@example.org>" and doc.meta["to"] == "Bob Reader <bob@example.org>"
    assert doc.meta["date"] == "Tue, 01 Feb 2022 10:00:00 +0000"
    assert "The numbers are in the attachment." in doc.text()
    child = out[Source.from_path(p).uri + "#report.md"].document
    assert child is not None and child.title == "Harbour Report"
    assert [h.text for h in child.headings()] == ["Harbour Report"]


def test_mbox_messages_and_their_attachments(tmp_path: Path) -> None:
    one = message("First voyage", "We sailed north.\n", ("log.md", MARKDOWN))
    two = message("Second voyage", "We sailed south.\nFrom the bridge, all clear.\n")
    data = b"".join(b"From ann@example.org Tue Feb  1 10:00:00 2022\n" + bytes(m).replace(b"\nFrom ", b"\n>From ")
                    + b"\n" for m in (one, two))
    p = tmp_path / "voyages.mbox"
    p.write_bytes(data)
    out = by_uri(p)
    base = Source.from_path(p).uri
    parent = out[base].document
    assert parent is not None and parent.meta["messages"] == "2"
    first = out[base + "#message-1.eml"].document
    second = out[base + "#message-2.eml"].document
    assert first is not None and second is not None
    assert first.title == "First voyage" and second.title == "Second voyage"
    assert second.meta["from"] == "Ann Author <ann@example.org>"
    assert "From the bridge, all clear." in second.text()  # mboxrd quoting undone
    attached = out[base + "#message-1.eml#log.md"].document
    assert attached is not None and "fishing fleet" in attached.text()


def test_mboxo_body_line_starting_with_from_does_not_split(tmp_path: Path) -> None:
    # mboxo writers leave "From " at a body line's start unquoted; git's t5100 has such boxes.
    body = "Minutes.\n\nFrom the harbour master: no sailing today.\nFrom now on, report at noon.\n"
    p = tmp_path / "minutes.mbox"
    p.write_bytes(b"From ann@example.org Tue Feb  1 10:00:00 2022\n" + bytes(message("Minutes", body)) + b"\n")
    out = by_uri(p)
    base = Source.from_path(p).uri
    assert out[base].document is not None and out[base].document.meta["messages"] == "1"
    only = out[base + "#message-1.eml"].document
    assert only is not None and "From now on, report at noon." in only.text()
    assert all(o.ok for o in out.values())


def test_content_decides_when_the_suffix_lies(tmp_path: Path) -> None:
    # A mail with a binary part saved as .txt (as in hyperkitty's test data): the text converter
    # refuses the bytes, the content says mbox, and it is converted as one, not recorded as failed.
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4
    msg = message("Harbour photo", "The photo of the harbour is below.\n")
    p = tmp_path / "saved-mail.txt"
    p.write_bytes(b"From ann@example.org  Tue Feb  1 10:00:00 2022\n" + bytes(msg) + b"\n" + png)
    out = by_uri(p)
    base = Source.from_path(p).uri
    assert out[base].ok and out[base].document.mime == "application/mbox"
    first = out[base + "#message-1.eml"].document
    assert first is not None and first.title == "Harbour photo"
    # Bytes that are nothing we know stay a failure, with the text converter's reason.
    q = tmp_path / "noise.txt"
    q.write_bytes(bytes(range(256)) * 64)
    bad = convert(Source.from_path(q))[0]
    assert not bad.ok and bad.reason == "corrupt" and "binary data" in bad.message


def _tar_bytes(files: dict[str, bytes], mode: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as t:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_zip_with_nested_archive(tmp_path: Path) -> None:
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        z.writestr("deep/note.txt", "a note from the inner archive")
    p = tmp_path / "bundle.zip"
    with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("docs/report.md", MARKDOWN)
        z.writestr("docs/", b"")
        z.writestr("inner.zip", inner.getvalue())
    out = by_uri(p)
    base = Source.from_path(p).uri
    assert out[base].document.meta["members"] == "2"  # type: ignore[union-attr]
    report = out[base + "#docs/report.md"].document
    assert report is not None and report.title == "Harbour Report" and "fishing fleet" in report.text()
    note = out[base + "#inner.zip#deep/note.txt"].document
    assert note is not None and "inner archive" in note.text()
    assert len(out) == 4  # the zip, the report, the inner zip, its note: no directory entries


def _flag_encrypted(data: bytes, name: bytes) -> bytes:
    """Set the encryption bit of member ``name`` in its local and central headers. zipfile cannot
    write encrypted members and no encrypting zip tool is a test dependency; readers decide from
    this bit alone, so the member looks to them exactly as a password-protected one does."""
    buf = bytearray(data)
    for sig, flags_at, name_len_at, name_at in ((b"PK\x03\x04", 6, 26, 30), (b"PK\x01\x02", 8, 28, 46)):
        at = buf.find(sig)
        while at >= 0:
            n = int.from_bytes(buf[at + name_len_at:at + name_len_at + 2], "little")
            if bytes(buf[at + name_at:at + name_at + n]) == name:
                buf[at + flags_at] |= 0x1
            at = buf.find(sig, at + 4)
    return bytes(buf)


def test_zip_encrypted_member_says_so_and_the_others_are_kept(tmp_path: Path) -> None:
    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("open.md", MARKDOWN)
        z.writestr("secret.txt", "the vault code")
    data = _flag_encrypted(raw.getvalue(), b"secret.txt")
    p = tmp_path / "mixed.zip"
    p.write_bytes(data)
    out = by_uri(p)
    base = Source.from_path(p).uri
    assert out[base].ok and out[base + "#open.md"].ok
    secret = out[base + "#secret.txt"]
    assert not secret.ok and secret.reason == "encrypted" and "password" in secret.message
    # The same rule for zip-based documents (ODF, OOXML, EPUB), which read members through zipcheck.
    with pytest.raises(Encrypted, match="secret.txt"):
        read_member(zipfile.ZipFile(io.BytesIO(data)), "secret.txt", "ODT")


@pytest.mark.parametrize("suffix,mode", [("tar", "w"), ("tar.gz", "w:gz"), ("tgz", "w:gz"),
                                         ("tar.bz2", "w:bz2"), ("tar.xz", "w:xz")])
def test_tar_variants(tmp_path: Path, suffix: str, mode: str) -> None:
    p = tmp_path / f"backup.{suffix}"
    p.write_bytes(_tar_bytes({"notes/report.md": MARKDOWN, "notes/plain.txt": b"plain words inside"}, mode))
    out = by_uri(p)
    base = Source.from_path(p).uri
    assert out[base].document.mime == "application/x-tar"  # type: ignore[union-attr]
    report = out[base + "#notes/report.md"].document
    assert report is not None and report.title == "Harbour Report"
    assert "plain words inside" in out[base + "#notes/plain.txt"].document.text()  # type: ignore[union-attr]


@pytest.mark.parametrize("suffix,compress,mime", [("gz", gzip.compress, "application/gzip"),
                                                  ("bz2", bz2.compress, "application/x-bzip2"),
                                                  ("xz", lzma.compress, "application/x-xz")])
def test_single_compressed_files(tmp_path: Path, suffix: str, compress, mime: str) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / f"report.md.{suffix}"
    p.write_bytes(compress(MARKDOWN))
    out = by_uri(p)
    base = Source.from_path(p).uri
    # One document, the file it holds, under the compressed file's own URI: no member.
    assert list(out) == [base]
    doc = out[base].document
    assert doc is not None and doc.mime == "text/markdown" and doc.meta["compression"] == mime
    assert doc.title == "Harbour Report" and "fishing fleet" in doc.text()
    # Without a telling suffix the content is sniffed.
    q = tmp_path / "blob"
    q.write_bytes(compress(b"just some sniffed words\n"))
    only = by_uri(q)
    assert list(only) == [Source.from_path(q).uri]
    assert "sniffed words" in only[Source.from_path(q).uri].document.text()  # type: ignore[union-attr]


def _warc(path: Path, pages: dict[str, bytes], gz: bool) -> None:
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    with open(path, "wb") as f:
        w = WARCWriter(f, gzip=gz)
        w.write_record(w.create_warcinfo_record(path.name, {"software": "test"}))
        for url, body in pages.items():
            headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
            record = w.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=headers)
            w.write_record(record)
            record.raw_stream.close()  # warcio copied the payload into a temporary file it leaves open


@pytest.mark.parametrize("name,gz", [("crawl.warc", False), ("crawl.warc.gz", True)])
def test_warc_response_records_keyed_by_url(tmp_path: Path, name: str, gz: bool) -> None:
    p = tmp_path / name
    _warc(p, {"http://example.org/harbour": b"<html><head><title>Harbour Page</title></head><body>"
                                           b"<h1>Fleet</h1><p>boats at anchor</p></body></html>",
              "http://example.org/plain?x=1": b"<p>second page words</p>"}, gz)
    out = by_uri(p)
    base = Source.from_path(p).uri
    assert out[base].document.mime == "application/warc"  # type: ignore[union-attr]
    page = out[base + "#http%3A//example.org/harbour"].document
    assert page is not None and page.title == "Harbour Page" and [h.text for h in page.headings()] == ["Fleet"]
    assert "boats at anchor" in page.text()
    assert "second page words" in out[base + "#http%3A//example.org/plain%3Fx%3D1"].document.text()  # type: ignore[union-attr]
    assert len(out) == 3  # the warcinfo record is not a document


def test_trec_documents_named_by_docno(tmp_path: Path) -> None:
    p = tmp_path / "bundle.trec"
    p.write_bytes(b"<DOC>\n<DOCNO>GX000-00-0000001</DOCNO>\n<DOCHDR>\nhttp://example.org/\nHTTP/1.1 200 OK\n"
                  b"</DOCHDR>\n<html><title>Lighthouse</title><body><h2>Keeper</h2>lamp words</body></html>\n"
                  b"</DOC>\n<DOC>\n<DOCNO> GX000-00-0000002 </DOCNO>\n<TEXT>older trec text</TEXT>\n</DOC>\n")
    out = by_uri(p)
    base = Source.from_path(p).uri
    assert out[base].document.meta["members"] == "2"  # type: ignore[union-attr]
    first = out[base + "#GX000-00-0000001"].document
    assert first is not None and first.title == "Lighthouse" and "lamp words" in first.text()
    assert [h.text for h in first.headings()] == ["Keeper"]
    assert "older trec text" in out[base + "#GX000-00-0000002"].document.text()  # type: ignore[union-attr]


@pytest.mark.corpus
@pytest.mark.parametrize("suffix", ["eml", "mbox", "gz"])
def test_corpus_mail_and_compressed(suffix: str) -> None:
    corpus = need_corpus()
    files = sorted(corpus.rglob(f"*.{suffix}"))
    if not files:
        pytest.skip(f"no .{suffix} files in the corpus")
    sample = random.Random(11).sample(files, min(30, len(files)))
    tops, children = [], []
    for f in sample:
        outcomes = convert(Source.from_path(f))
        tops.append(outcomes[0])
        children.extend(outcomes[1:])
    failed = {o.uri: o.message for o in tops + children if not o.ok}
    assert not [o for o in tops + children if o.reason == "converter_bug"], failed
    assert sum(o.ok for o in tops) >= 0.9 * len(tops), failed
    if suffix == "gz":  # a compressed single file is one document (a .tar.gz is a TAR)
        assert not children or all("#" in o.uri for o in children)
    if suffix == "mbox":
        assert children and sum(o.ok for o in children) >= 0.8 * len(children), failed
        assert all("#" in o.uri for o in children)
