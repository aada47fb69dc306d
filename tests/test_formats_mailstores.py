"""Mail stores on disk: Thunderbird's folders (mbox files without a suffix, beside a Mork ``.msf``
index that is left out) and Maildir (one message a file in ``cur``/``new``; ``tmp`` left out)."""

from __future__ import annotations

import os
from email.message import EmailMessage
from pathlib import Path
from urllib.parse import unquote

import pytest

from deskdex.converters.detect import extension, sniff

from .conftest import CLI, worded


def message(subject: str, body: str, attachment: tuple[str, bytes] | None = None) -> bytes:
    m = EmailMessage()
    m["From"] = "Ann Author <ann@example.org>"
    m["To"] = "Bob Reader <bob@example.org>"
    m["Subject"] = subject
    m["Date"] = "Thu, 03 Dec 2026 10:00:00 +0000"
    m["Message-ID"] = f"<{subject.replace(' ', '.')}@example.org>"
    m.set_content(body)
    if attachment:
        m.add_attachment(attachment[1], maintype="text", subtype="plain", filename=attachment[0])
    return bytes(m)


def thunderbird_inbox() -> bytes:
    msgs = [message("Lighthouse keepers", "The lamp at Pharos needs oil.\n"),
            message("Ferry timetable", "The ferry to Skerrivore leaves at noon.\n",
                    ("crew.txt", b"Crew list: Morag, Angus and Fenwick the quartermaster.\n")),
            message("Harbour dues", "Please settle the dues for the trawler Kittiwake.\n")]
    return b"".join(b"From - Thu Dec  3 10:00:00 2026\nX-Mozilla-Status: 0001\nX-Mozilla-Status2: 00000000\n"
                    + m + b"\n" for m in msgs)


MORK = b'// <!-- <mdb:mork:z v="1.4"/> -->\n< <(a=c)> // (f=iso-8859-1)\n  (B8=Lighthouse)(B9=Pharos)>\n'


@pytest.mark.parametrize("head, mime", [
    (b"From - Thu Dec  3 10:00:00 2026\nX-Mozilla-Status: 0001\nFrom: a@b\nSubject: x\n\nbody\n", "application/mbox"),
    (b"From someone@example.com Thu Dec  3 10:00:00 2026\nReturn-Path: <a@b>\nDate: x\n\nbody\n",
     "application/mbox"),
    (b"From here on, all is well.\nSubject: x\nFrom: y\n\n", "text/plain"),
    (b"Return-Path: <a@b>\nReceived: from x\n  by y\nSubject: hi\n\nbody\n", "message/rfc822"),
    (b"Subject: notes\nthings to do\n", "text/plain"),
    (b"Subject: notes\n\nthings to do\n", "text/plain"),
    (b"Subject: notes\nTodo: buy milk\n\nthings\n", "text/plain"),
    (MORK, "text/plain"),
])
def test_sniff_mail(head: bytes, mime: str) -> None:
    assert sniff(head) == mime


@pytest.mark.slow
def test_thunderbird_and_maildir_indexed_and_searched(cli: CLI, tmp_path: Path) -> None:
    tree = tmp_path / "mail"
    folders = tree / "profile" / "Mail" / "Local Folders"
    folders.mkdir(parents=True)
    (folders / "Inbox").write_bytes(thunderbird_inbox())
    (folders / "Inbox.msf").write_bytes(MORK)
    (tree / "notes").write_bytes(b"Subject: notes\nRemember the lighthouse lantern wick.\n")
    maildir = tree / "Maildir"
    for sub in ("cur", "new", "tmp"):
        (maildir / sub).mkdir(parents=True)
    (maildir / "cur" / "1700000000.M123P456.host,S=400:2,S").write_bytes(
        b"Return-Path: <ann@example.org>\nDelivered-To: bob@example.org\n"
        + message("Tide tables", "High water at Oban is at dusk.\n"))
    (maildir / "new" / "1700000100.M124P456.host,S=400").write_bytes(
        message("Puffin census", "Forty puffins counted on Staffa.\n"))
    (maildir / "tmp" / "1700000200.M125P456.host").write_bytes(
        message("Half delivered", "Gannets half written.\n"))

    summary = cli.json("index", str(tree))
    assert summary["failed"] == 0 and summary["indexed"] == 4  # Inbox, notes, cur/ and new/: no .msf, no tmp/

    def hits(*words: str) -> list[dict[str, str]]:
        return worded(cli.json("search", *words, "--limit", "50"))

    def found(*words: str) -> list[str]:
        """Each hit's URI below the tree, undone of its escapes (a member's after its "#")."""
        return [unquote(h["uri"]).replace(tree.as_uri() + "/", "") for h in hits(*words)]

    inbox = "profile/Mail/Local Folders/Inbox"
    for words, title in [("pharos", "Lighthouse keepers"), ("skerrivore", "Ferry timetable"),
                         ("harbour dues", "Harbour dues")]:  # by a body word; the last by its title
        got = hits(*words.split())
        assert len(got) == 1 and got[0]["title"] == title, got
        assert unquote(got[0]["uri"]).startswith(tree.as_uri() + "/" + inbox + "#message-"), got
    assert [p for p in found("fenwick") if "#crew.txt" in p]  # the attachment, a member of its message
    lighthouse = found("lighthouse")  # in the .msf too, which is left out
    assert sorted(lighthouse) == ["notes", inbox + "#message-1.eml"], lighthouse
    notes = hits("lantern")  # "Subject: notes" alone does not make a text a mail
    assert [(h["path"], h["mime"]) for h in notes] == [(str(tree / "notes"), "text/plain")]

    oban = hits("oban")
    assert [h["title"] for h in oban] == ["Tide tables"] and oban[0]["mime"] == "message/rfc822"
    assert oban[0]["ext"] == ""  # "host,S=400:2,S" is the host and flags, no file type
    assert found("puffins") == ["Maildir/new/1700000100.M124P456.host,S=400"]
    assert found("gannets") == []  # tmp/: delivery in progress

    # The mail program reads the new message: moved from new/ to cur/ with its flags appended.
    os.rename(maildir / "new" / "1700000100.M124P456.host,S=400", maildir / "cur" / "1700000100.M124P456.host,S=400:2,S")
    assert cli.json("index", str(tree))["failed"] == 0
    assert found("puffins") == ["Maildir/cur/1700000100.M124P456.host,S=400:2,S"]
    assert [h["ext"] for h in hits("puffins")] == [""]
    assert [h["title"] for h in hits("puffin", "census")] == ["Puffin census"]


@pytest.mark.parametrize("name, ext", [
    ("1700000000.M1P2.mail.example.com:2,S", ""), ("1700000000.M1P2.host,S=400", ""), ("report.PDF", "pdf"),
    ("archive.tar.gz", "gz"), (".bashrc", ""), ("notes", ""), ("ls.1", "1"), ("x.c++", "c++"),
    ("photo.jpeg~", ""), ("a.verylongsuffixbeyondsixteen", ""),
])
def test_extension_is_a_file_type_or_nothing(name: str, ext: str) -> None:
    assert extension(name) == ext
