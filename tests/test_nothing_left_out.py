"""Issue 28: no mail, cell or paragraph lost by a converter. A mail store keeps every message
(its messages are bounded by the file size, not by the member count that stops zip bombs); a
container that really meets a limit keeps what it read and says ``partial``, with how many members
it left out, in ``deskdex status`` and ``status --failures``; a Gnumeric workbook keeps every cell
(formulas too), comment and sheet name; a FictionBook book with images keeps every paragraph."""

from __future__ import annotations

import base64
import gzip
import os
import zipfile
from pathlib import Path

import pytest

from deskdex.converters import Limits, Outcome, Source, convert
from deskdex.converters import sheets
from deskdex.converters.document import Document

from .conftest import CLI


def mbox(n: int, last_word: str = "zanzibarquokka") -> bytes:
    """``n`` small messages, as mail programs write them; only the last one says ``last_word``."""
    out = []
    for i in range(1, n + 1):
        word = last_word if i == n else f"routine{i % 97}"
        out.append(f"From sender{i}@example.org Thu Dec  3 10:{i % 60:02d}:00 2026\n"
                   f"From: sender{i}@example.org\nTo: bob@example.org\nSubject: note {i}\n"
                   f"Date: Thu, 03 Dec 2026 10:00:00 +0000\nMessage-ID: <m{i}@example.org>\n\n"
                   f"Message {i} says {word} about harbour report {i}.\n\n")
    return "".join(out).encode()


def zipped(path: Path, n: int) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for i in range(1, n + 1):
            zf.writestr(f"notes/note-{i:05d}.txt", f"Note {i} about lighthouse number{i}.\n")
    return path


def parent_of(outcomes: list[Outcome]) -> Document:
    doc = outcomes[0].document
    assert doc is not None, (outcomes[0].reason, outcomes[0].message)
    return doc


# -- containers, converted directly --------------------------------------------------------------


def test_a_mailbox_keeps_messages_past_the_member_limit(tmp_path: Path) -> None:
    (tmp_path / "box.mbox").write_bytes(mbox(25))
    outcomes = convert(Source.from_path(tmp_path / "box.mbox"), limits=Limits(members=20))
    parent = parent_of(outcomes)
    assert "partial" not in parent.meta
    assert len(outcomes) == 26 and all(o.ok for o in outcomes)
    assert "zanzibarquokka" in outcomes[-1].document.body_text()  # type: ignore[union-attr]


def test_a_zip_over_the_member_limit_says_how_many_it_left_out(tmp_path: Path) -> None:
    outcomes = convert(Source.from_path(zipped(tmp_path / "notes.zip", 25)), limits=Limits(members=20))
    parent = parent_of(outcomes)
    assert parent.meta["partial"] == "5 of 25 members left out: over the limit of 20 members"
    assert len(outcomes) == 21 and all(o.ok for o in outcomes)  # the 20 read stay


def test_a_zip_at_the_member_limit_is_whole(tmp_path: Path) -> None:
    outcomes = convert(Source.from_path(zipped(tmp_path / "notes.zip", 20)), limits=Limits(members=20))
    assert "partial" not in parent_of(outcomes).meta and len(outcomes) == 21


def test_a_mailbox_too_big_for_the_time_limit_keeps_what_it_read(tmp_path: Path) -> None:
    # 20,000 messages take well over the 0.3 s a 0.5 s time limit leaves containers (3,000 once
    # did, until reading a message took 0.1 ms): the worker would be killed with nothing kept;
    # instead the messages read stay, and the mailbox fails as a timeout (tried again later: a busy
    # machine may cause it) saying how many it left out.
    n = 20_000
    (tmp_path / "big.mbox").write_bytes(mbox(n))
    outcomes = convert(Source.from_path(tmp_path / "big.mbox"), limits=Limits(time_seconds=0.5))
    kept = len(outcomes) - 1
    assert 0 < kept < n and all(o.ok for o in outcomes[1:])
    assert (outcomes[0].reason, outcomes[0].message) == (
        "timeout", f"{n - kept:,} of {n:,} members left out: the time limit (0.5 s) ran out")


def test_a_broken_tar_keeps_its_first_members_and_says_partial(tmp_path: Path) -> None:
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for i in range(3):
            data = f"Tar note {i} about gannets.\n".encode() * 200
            info = tarfile.TarInfo(f"note-{i}.txt")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    first = 512 + -(-len("Tar note 0 about gannets.\n" * 200) // 512) * 512  # its header and data blocks
    (tmp_path / "cut.tar").write_bytes(buf.getvalue()[:first + 512 + 200])  # the second member cut short
    outcomes = convert(Source.from_path(tmp_path / "cut.tar"))
    parent = parent_of(outcomes)
    assert parent.meta["partial"].startswith("members after the first 2 left out: corrupt: TAR broken after 2 members")
    assert outcomes[1].ok and "gannets" in outcomes[1].document.body_text()  # type: ignore[union-attr]


# -- the whole way: deskdex index, search and status, as a user runs them ------------------------


def _cli(home: Path) -> CLI:
    (home / "config").mkdir(parents=True, exist_ok=True)
    # Generous: the machine running the tests may be busy; the point is the member limit.
    (home / "config" / "config.toml").write_text("time_limit = 900\n")
    return CLI(home)


@pytest.mark.slow
def test_every_message_of_a_big_mailbox_is_indexed(tmp_path: Path) -> None:
    cli = _cli(tmp_path / "home")
    mail = tmp_path / "mail"
    mail.mkdir()
    (mail / "Inbox").write_bytes(mbox(20_050))  # a Thunderbird folder: an mbox without a suffix
    summary = cli.json("--home", str(cli.home), "index", str(mail))
    assert summary["failed"] == 0 and summary["members"] == 20_050
    hits = cli.json("--home", str(cli.home), "search", "zanzibarquokka")["hits"]
    assert [h["uri"].rsplit("#", 1)[-1] for h in hits] == ["message-20050.eml"]
    status = cli.json("--home", str(cli.home), "status", "--failures")
    assert status["failed"] == 0 and status["failures"] == []


@pytest.mark.slow
def test_a_zip_over_the_member_limit_is_partial_in_status(tmp_path: Path) -> None:
    cli = _cli(tmp_path / "home")
    docs = tmp_path / "docs"
    docs.mkdir()
    zipped(docs / "notes.zip", 20_050)
    cli.run("--home", str(cli.home), "index", str(docs), timeout=900)
    # What was read is searchable...
    assert len(cli.json("--home", str(cli.home), "search", "number19999")["hits"]) == 1
    assert cli.json("--home", str(cli.home), "search", "number20050")["hits"] == []
    # ...and what was not is said, counted and listed with the failures.
    out = cli.run("--home", str(cli.home), "status", "--failures").stdout
    assert "  partial: 1" in out
    assert f"{docs / 'notes.zip'}: partial: 50 of 20,050 members left out: over the limit of 20,000 members" in out
    status = cli.json("--home", str(cli.home), "status")
    assert status["failed_by_reason"] == {"partial": 1}


# -- Gnumeric: every cell, comment and sheet name ------------------------------------------------

# As Gnumeric 1.12 writes a workbook (gzip'd): objects before cells, a merged region (its anchor cell
# and a stray value inside it), formulas without a cached value, a shared expression, an array
# formula, values of every ValueType, a plain and a rich-text comment, and a sheet with no cells.
GNUMERIC = """<?xml version="1.0" encoding="UTF-8"?>
<gnm:Workbook xmlns:gnm="http://www.gnumeric.org/v10.dtd" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <gnm:Version Epoch="1" Major="12" Minor="55" Full="1.12.55"/>
  <gnm:SheetNameIndex>
    <gnm:SheetName gnm:Cols="256" gnm:Rows="65536">Ledger &amp; tallies</gnm:SheetName>
    <gnm:SheetName gnm:Cols="256" gnm:Rows="65536">Wombat burrows</gnm:SheetName>
  </gnm:SheetNameIndex>
  <gnm:Sheets>
    <gnm:Sheet DisplayFormulas="0" HideZero="0" HideGrid="0" Visibility="GNM_SHEET_VISIBILITY_VISIBLE">
      <gnm:Name>Ledger &amp; tallies</gnm:Name>
      <gnm:MaxCol>4</gnm:MaxCol>
      <gnm:MaxRow>9</gnm:MaxRow>
      <gnm:Names>
        <gnm:Name><gnm:name>Print_Area</gnm:name><gnm:value>#REF!</gnm:value><gnm:position>A1</gnm:position></gnm:Name>
      </gnm:Names>
      <gnm:Objects>
        <gnm:CellComment ObjectBound="A1" ObjectOffset="1 0 1 0" Direction="17" Print="1" Author="Ann"
          Text="plain comment about pelicans"/>
        <gnm:CellComment ObjectBound="B2" ObjectOffset="1 0 1 0" Direction="17" Print="1" Author="Ann"
          Text="rich comment about cormorants" TextFormat="@[bold=1:0:4][italic=1:13:18]"/>
      </gnm:Objects>
      <gnm:Cells>
        <gnm:Cell Row="0" Col="0" ValueType="40">42</gnm:Cell>
        <gnm:Cell Row="1" Col="1" ValueType="60">merged anchor heron</gnm:Cell>
        <gnm:Cell Row="2" Col="2" ValueType="60">covered egret</gnm:Cell>
        <gnm:Cell Row="5" Col="0">="kittiwake "&amp;A1</gnm:Cell>
        <gnm:Cell Row="5" Col="1" ExprID="1">=LEN(A6)&amp;" gannets"</gnm:Cell>
        <gnm:Cell Row="6" Col="1" ExprID="1"/>
        <gnm:Cell Row="7" Col="0" ValueType="50">#DIV/0!</gnm:Cell>
        <gnm:Cell Row="7" Col="1" ValueType="20">FALSE</gnm:Cell>
        <gnm:Cell Row="7" Col="2" ValueType="80">{1,2;3,4}</gnm:Cell>
        <gnm:Cell Row="8" Col="0" Rows="2" Cols="1">=TRANSPOSE({"puffin","shag"})</gnm:Cell>
      </gnm:Cells>
      <gnm:MergedRegions>
        <gnm:Merge>B2:D4</gnm:Merge>
      </gnm:MergedRegions>
    </gnm:Sheet>
    <gnm:Sheet Visibility="GNM_SHEET_VISIBILITY_VISIBLE">
      <gnm:Name>Wombat burrows</gnm:Name>
      <gnm:Cells/>
    </gnm:Sheet>
  </gnm:Sheets>
</gnm:Workbook>
"""


def test_gnumeric_keeps_every_cell_comment_and_sheet_name(tmp_path: Path) -> None:
    (tmp_path / "ledger.gnumeric").write_bytes(gzip.compress(GNUMERIC.encode()))
    outcome = convert(Source.from_path(tmp_path / "ledger.gnumeric"))[0]
    assert outcome.document is not None, (outcome.reason, outcome.message)
    assert [(b.kind, b.text) for b in outcome.document.blocks] == [
        ("h", "Ledger & tallies"), ("td", "42"), ("td", "merged anchor heron"), ("td", "covered egret"),
        ("td", '="kittiwake "&A1'), ("td", '=LEN(A6)&" gannets"'), ("td", "#DIV/0!"), ("td", "FALSE"),
        ("td", "{1,2;3,4}"), ("td", '=TRANSPOSE({"puffin","shag"})'),
        ("td", "plain comment about pelicans"), ("td", "rich comment about cormorants"),
        ("h", "Wombat burrows")]
    assert "partial" not in outcome.document.meta


def test_a_workbook_over_the_cell_cap_is_partial_and_keeps_every_sheet_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sheets, "MAX_CELLS", 3)  # the cap, not the workbook, is made small
    (tmp_path / "ledger.gnumeric").write_bytes(gzip.compress(GNUMERIC.encode()))
    doc = convert(Source.from_path(tmp_path / "ledger.gnumeric"))[0].document
    assert doc is not None
    assert [(b.kind, b.text) for b in doc.blocks] == [
        ("h", "Ledger & tallies"), ("td", "42"), ("td", "merged anchor heron"), ("td", "covered egret"),
        ("h", "Wombat burrows")]
    assert doc.meta["partial"] == "cells after the first 3 left out (the cells one workbook keeps)"


# -- FictionBook with images ---------------------------------------------------------------------


def test_fictionbook_with_images_keeps_every_paragraph(tmp_path: Path) -> None:
    # A cover scan of 8 MB: 10.8 MB of base64, one text node past libxml2's 10 MB limit.
    cover = base64.encodebytes(os.urandom(8_000_000)).decode()
    small = base64.encodebytes(os.urandom(3000)).decode()
    book = f"""<?xml version="1.0" encoding="UTF-8"?>
<FictionBook xmlns="http://www.gribuser.ru/xml/fictionbook/2.0" xmlns:l="http://www.w3.org/1999/xlink">
 <description><title-info>
  <book-title>Pictures of the coast</book-title>
  <coverpage><image l:href="#cover.jpg"/></coverpage>
 </title-info></description>
 <body>
  <image l:href="#cover.jpg"/>
  <title><p>Seabirds</p></title>
  <section>
   <title><image l:href="#gull.png"/><p>Gulls</p></title>
   <p>First paragraph about aardvarks.</p>
   <image l:href="#gull.png"/>
   <p>Between <image l:href="#gull.png"/> two images: zebrafinch.</p>
   <empty-line/>
   <p><image l:href="#gull.png"/></p>
   <p>After the pictures: tern colonies.</p>
  </section>
 </body>
 <binary id="cover.jpg" content-type="image/jpeg">{cover}</binary>
 <binary id="gull.png" content-type="image/png">{small}</binary>
</FictionBook>
"""
    (tmp_path / "images.fb2").write_text(book)
    outcome = convert(Source.from_path(tmp_path / "images.fb2"))[0]
    assert outcome.document is not None, (outcome.reason, outcome.message)
    doc = outcome.document
    assert doc.title == "Pictures of the coast"
    assert [(b.kind, b.text) for b in doc.blocks] == [
        ("h", "Seabirds"), ("h", "Gulls"), ("p", "First paragraph about aardvarks."),
        ("p", "Between two images: zebrafinch."), ("p", "After the pictures: tern colonies.")]
    assert small.split()[0] not in doc.body_text()  # base64 is no text


def test_a_text_past_the_text_limit_says_partial(tmp_path: Path) -> None:
    (tmp_path / "long.txt").write_text("".join(f"Paragraph {i} about ospreys.\n\n" for i in range(50)))
    doc = convert(Source.from_path(tmp_path / "long.txt"), limits=Limits(text_chars=100))[0].document
    assert doc is not None and 0 < len(doc.blocks) < 50
    assert doc.meta["partial"] == "text after the first 100 characters left out (the text one document keeps)"


def test_an_mmdf_mailbox_keeps_every_message(tmp_path: Path) -> None:
    import mailbox
    from email.message import EmailMessage

    box = mailbox.MMDF(str(tmp_path / "Archive"))  # a folder as mutt keeps them: no suffix
    for i in range(1, 25):
        m = EmailMessage()
        m["From"], m["Subject"] = f"sender{i}@example.org", f"note {i}"
        m.set_content(f"Message {i} about the harbour.")
        box.add(m)
    box.close()
    with open(tmp_path / "Archive", "ab") as f:  # a writer that puts no "From " line inside
        f.write(b"\x01\x01\x01\x01\nFrom: last@example.org\nSubject: the last\n\nIt says zanzibarquokka.\n"
                b"\x01\x01\x01\x01\n")
    outcomes = convert(Source.from_path(tmp_path / "Archive"), limits=Limits(members=20))
    parent = parent_of(outcomes)
    assert parent.mime == "application/mbox" and parent.meta["messages"] == "25" and "partial" not in parent.meta
    assert [o.document.title for o in outcomes[1:] if o.document] == [f"note {i}" for i in range(1, 25)] + ["the last"]
    assert "zanzibarquokka" in outcomes[-1].document.body_text()  # type: ignore[union-attr]


def test_a_partial_file_stays_listed_when_its_text_is_reused(tmp_path: Path) -> None:
    """A copy of a partial file (or the file touched) takes its stored text without a conversion
    (Collection.reuse): it leaves out the same, so it is listed and counted the same."""
    from deskdex.index import Collection, reports
    from deskdex.index.store import Row

    doc = Document(uri="file:///w/big.gnumeric", mime="application/x-gnumeric", title="big")
    doc.add("td", "osprey")
    doc.meta["partial"] = "cells after the first 200,000 left out (the cells one workbook keeps)"
    with Collection.open(str(tmp_path / "data"), writable=True) as coll:
        coll.put(Row(uri=doc.uri, path="/w/big.gnumeric", raw_sum="r1"), doc)
        same = coll.get(doc.uri)
        assert same is not None
        coll.reuse(Row(uri="file:///w/copy.gnumeric", path="/w/copy.gnumeric", raw_sum="r1"), same)
        coll.commit()
        listed = {(f["path"], f["reason"], f["message"]) for f in reports.failures(coll)}
        counts = coll.stats.counts()
    assert listed == {(p, "partial", doc.meta["partial"]) for p in ("/w/big.gnumeric", "/w/copy.gnumeric")}
    assert counts["documents"] == 2 and counts["failed_by_reason"] == {"partial": 2}
