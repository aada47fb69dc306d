"""tests/imap_server.py: the real Dovecot the IMAP source tests talk to logs in, keeps what is
appended (folders nested with "/"), forgets what is deleted, and comes back with the same mail
after it went away."""

from __future__ import annotations

import imaplib
import re
import socket
from pathlib import Path
from typing import Iterator

import pytest

from .imap_server import SEPARATOR, ImapServer, dovecot_missing, sample_message

pytestmark = pytest.mark.skipif(dovecot_missing() != "", reason=dovecot_missing())


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ImapServer]:
    with ImapServer(tmp_path / "imap") as s:
        yield s


def _login(server: ImapServer) -> imaplib.IMAP4:
    client = imaplib.IMAP4(server.host, server.port, timeout=10)
    client.login(server.user, server.password)
    return client


def test_append_list_and_fetch_back(server: ImapServer) -> None:
    assert server.url == f"imap://alice@127.0.0.1:{server.port}"
    first = sample_message("Quarterly report", "The numbers are in.")
    second = sample_message("With a file", "See the attachment.", ("notes.txt", b"attached words\n"))
    u1, u2 = server.append("INBOX", first), server.append("INBOX", second)
    u3 = server.append("Work/Projects", sample_message("Plans", "Next year's plans."))
    assert (u1, u2, u3) == (1, 2, 1)  # UIDs count per folder
    assert server.uids("INBOX") == [1, 2] and server.uids("Work/Projects") == [1]
    assert server.uidvalidity("INBOX") > 0 and server.uidvalidity("Work/Projects") > 0

    client = _login(server)
    try:
        typ, listing = client.list()
        assert typ == "OK"
        # (flags) "separator" name: Dovecot answers with the namespace's "/", and shows the parent
        # "Work" that was never created itself as \Noselect
        folders = {}
        for line in listing:
            assert isinstance(line, bytes)
            m = re.fullmatch(rb'\((.*?)\) "(.)" "?(.*?)"?', line)
            assert m, line
            assert m.group(2).decode() == SEPARATOR
            folders[m.group(3).decode()] = m.group(1).decode()
        assert set(folders) == {"INBOX", "Work", "Work/Projects"}
        assert "\\Noselect" in folders["Work"]

        assert client.select("INBOX", readonly=True)[0] == "OK"
        typ, data = client.uid("FETCH", str(u2), "(BODY.PEEK[])")
        assert typ == "OK" and isinstance(data[0], tuple)
        assert data[0][1] == second  # byte for byte, attachment and all
    finally:
        client.logout()
    assert second.count(b"\r\n") == second.count(b"\n")  # sample_message writes IMAP's CRLF


def test_delete_removes_only_that_uid(server: ImapServer) -> None:
    uids = [server.append("INBOX", sample_message(f"Message {i}", f"Body {i}")) for i in range(3)]
    validity = server.uidvalidity("INBOX")
    server.delete("INBOX", uids[1])
    assert server.uids("INBOX") == [uids[0], uids[2]]
    with pytest.raises(LookupError):
        server.delete("INBOX", uids[1])
    # a new message never takes a deleted one's UID, and the folder stays the same folder
    assert server.append("INBOX", sample_message("Later", "Later body")) == uids[2] + 1
    assert server.uidvalidity("INBOX") == validity

    server.create_folder("Archive")
    server.append("Archive", sample_message("Old", "Old body"))
    server.delete_folder("Archive")
    client = _login(server)
    try:
        assert client.select('"Archive"', readonly=True)[0] == "NO"
    finally:
        client.logout()


@pytest.mark.slow  # two stops of Dovecot's, about a second each
def test_pause_refuses_and_resume_keeps_the_mail(server: ImapServer) -> None:
    uid = server.append("Work/Projects", sample_message("Kept", "Kept across the pause."))
    validity, port = server.uidvalidity("Work/Projects"), server.port
    open_session = _login(server)
    try:
        server.pause()
        assert not server.running
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((server.host, port), timeout=5).close()
        # a session open across the pause is cut, as when a real server goes down
        with pytest.raises((imaplib.IMAP4.abort, OSError)):
            open_session.noop()
    finally:
        open_session.shutdown()

    server.resume()
    assert server.port == port
    client = _login(server)
    try:
        assert client.select('"Work/Projects"', readonly=True)[0] == "OK"
        typ, data = client.uid("SEARCH", "ALL")
        assert typ == "OK" and data[0] == str(uid).encode()
    finally:
        client.logout()
    assert server.uidvalidity("Work/Projects") == validity
