"""Sources beyond the local disk, synced into a real collection: an IMAP account on a real Dovecot
(tests/imap_server.py) on 127.0.0.1, through deskdex.pipeline's SourceSync, as the daemon and
`deskdex source sync` run it. The daemon and the CLI around it: tests/test_sources_daemon.py."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from deskdex.errors import ConfigError, SourceRefused, SourceUnreachable
from deskdex.index import Collection, search_shards
from deskdex.pipeline import SourceSync, SyncReport
from deskdex.settings import check
from deskdex.sources import SourceEntry, normalise, open_source, password_of

from .conftest import make_docx, make_pdf
from .imap_server import ImapServer, dovecot_missing, sample_message

pytestmark = pytest.mark.skipif(bool(dovecot_missing()), reason=dovecot_missing() or "-")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ImapServer]:
    with ImapServer(tmp_path / "imap") as srv:
        yield srv


def sync(coll: Collection, srv: ImapServer, **kw: Any) -> SyncReport:
    source = open_source(srv.url, lambda: srv.password)
    try:
        return SourceSync(coll, **kw).run(source)
    finally:
        source.close()


def found(coll: Collection, query: str) -> list[str]:
    """The titles of the documents holding ``query``'s words."""
    hits = search_shards([coll], query, limit=100, words=True, collapse=False)["hits"]
    return sorted(h["title"] for h in hits)


def test_every_folders_messages_and_attachments_are_found_and_the_mail_stays_unread(
        server: ImapServer, coll: Collection, tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "budget.pdf", "Budget", "Bob", ["The walrus budget for the coming year."])
    docx = make_docx(tmp_path / "plan.docx", "Plan", "Bob", "Plan", ["A narwhal migration plan in detail."])
    server.append("INBOX", sample_message("Quarterly figures", "the okapi figures are ready"))
    server.append("INBOX", sample_message("Budget attached", "see the file", attachment=("budget.pdf", pdf.read_bytes())))
    server.create_folder("Work/Projects")
    server.append("Work/Projects", sample_message("Plan", "attached", attachment=("plan.docx", docx.read_bytes())))

    report = sync(coll, server)
    assert report.complete and report.fetched == 3 and report.stored == 3 and report.members == 2, report
    assert not report.failed, report.failures
    assert found(coll, "okapi") == ["Quarterly figures"]
    assert found(coll, "source:imap okapi") == ["Quarterly figures"] and found(coll, "source:files okapi") == []
    assert found(coll, "walrus") == ["Budget"]  # the PDF inside the message
    assert found(coll, "narwhal") == ["Plan"]
    row = coll.get(next(uri for uri, *_ in coll.under("imap://", "imap") if "Work/Projects" in uri))
    assert row is not None and row.source == "imap" and row.title == "Plan"
    uri = row.uri
    assert uri.startswith(f"imap://alice@127.0.0.1:{server.port}/Work/Projects;UIDVALIDITY=") and ";UID=1" in uri
    member = coll.get(uri + "#plan.docx")
    assert member is not None and member.parent == uri and member.status == "ok"
    # Read with BODY.PEEK in folders examined read-only: nothing is marked read.
    with server.session() as m:
        m.select('"INBOX"', readonly=True)
        typ, data = m.uid("FETCH", "1:*", "(FLAGS)")
        assert typ == "OK" and data and all(b"\\Seen" not in d for d in data if isinstance(d, bytes)), data


def test_a_second_sync_fetches_nothing_then_follows_new_deleted_and_moved_mail(
        server: ImapServer, coll: Collection) -> None:
    first = server.append("INBOX", sample_message("First", "an aardvark"))
    server.append("INBOX", sample_message("Second", "a bonobo"))
    server.append("Archive", sample_message("Old", "a coelacanth"))
    assert sync(coll, server).stored == 3

    again = sync(coll, server)
    assert (again.fetched, again.removed, again.unchanged_folders, again.complete) == (0, 0, 2, True), again

    server.delete("INBOX", first)
    server.append("INBOX", sample_message("Third", "a dugong"))
    changed = sync(coll, server)
    assert (changed.fetched, changed.removed, changed.unchanged_folders) == (1, 1, 1), changed
    assert found(coll, "aardvark") == [] and found(coll, "dugong") == ["Third"] and found(coll, "bonobo") == ["Second"]

    server.delete_folder("Archive")  # a folder gone: its messages go with it
    gone = sync(coll, server)
    assert gone.removed == 1 and found(coll, "coelacanth") == [], gone
    assert len(coll.under("imap://", "imap")) == 2


def test_a_folder_made_again_under_a_new_uidvalidity_is_fetched_again(server: ImapServer, coll: Collection) -> None:
    server.append("Lists", sample_message("Digest", "a pangolin"))
    sync(coll, server)
    old = server.uidvalidity("Lists")
    server.delete_folder("Lists")
    server.append("Lists", sample_message("Digest two", "a quokka"))
    assert server.uidvalidity("Lists") != old
    report = sync(coll, server)
    assert report.stored == 1 and report.removed == 1, report
    assert found(coll, "pangolin") == [] and found(coll, "quokka") == ["Digest two"]
    assert all(f";UIDVALIDITY={old}/" not in uri for uri, *_ in coll.under("imap://", "imap"))


def test_a_source_dropped_and_added_again_is_fetched_again(server: ImapServer, coll: Collection) -> None:
    server.append("INBOX", sample_message("Kept", "a serval"))
    sync(coll, server)
    source = open_source(server.url, lambda: server.password)
    assert SourceSync(coll).drop(source) == 1 and found(coll, "serval") == []
    # Its folders' stamps went with it: added again, nothing of it is taken as unchanged.
    again = sync(coll, server)
    assert again.stored == 1 and again.unchanged_folders == 0 and found(coll, "serval") == ["Kept"]


def test_a_server_that_goes_away_is_unreachable_and_nothing_indexed_from_it_is_lost(
        server: ImapServer, coll: Collection) -> None:
    server.append("INBOX", sample_message("Kept", "a tapir"))
    sync(coll, server)
    server.pause()
    try:
        with pytest.raises(SourceUnreachable, match="cannot connect"):
            sync(coll, server)
        assert found(coll, "tapir") == ["Kept"]
    finally:
        server.resume()
    server.append("INBOX", sample_message("Back", "a wombat"))
    report = sync(coll, server)
    assert report.stored == 1 and found(coll, "tapir") == ["Kept"] and found(coll, "wombat") == ["Back"]


def test_a_wrong_password_is_refused_with_the_reason(server: ImapServer, coll: Collection) -> None:
    server.append("INBOX", sample_message("Secret", "a lemur"))
    source = open_source(server.url, lambda: "not-the-password")
    with pytest.raises(SourceRefused, match="refused the login of alice"):
        SourceSync(coll).run(source)
    assert found(coll, "lemur") == []


def test_a_message_over_the_size_limit_is_a_failure_of_its_own(server: ImapServer, coll: Collection) -> None:
    from deskdex.converters import Limits

    server.append("INBOX", sample_message("Huge", "an ibex " + "x" * 5000))
    server.append("INBOX", sample_message("Small", "a jerboa"))
    report = sync(coll, server, limits=Limits(file_bytes=2000))
    assert report.failed == {"too_large": 1} and report.stored == 1, report
    assert found(coll, "jerboa") == ["Small"]
    failed = [r for r in coll.catalog.rows("status='failed'")]
    assert len(failed) == 1 and failed[0].reason == "too_large" and failed[0].size > 2000
    assert sync(coll, server).fetched == 0  # a message never changes: not fetched again


def test_a_sync_stopped_midway_keeps_what_it_stored_and_the_next_one_finishes_without_doubles(
        server: ImapServer, coll: Collection) -> None:
    for i in range(40):
        server.append("INBOX", sample_message(f"Note {i}", f"note number n{i}x in the mammoth series"))
    stop = threading.Event()
    source = open_source(server.url, lambda: server.password)
    sync_ = SourceSync(coll, stop=stop, commit_every=5)
    original = sync_._store

    def store_then_stop(*args: Any) -> None:  # stop after the tenth message, as a daemon's SIGTERM would
        original(*args)
        if args[-1].stored == 10:
            stop.set()

    sync_._store = store_then_stop  # type: ignore[method-assign]
    try:
        first = sync_.run(source)
    finally:
        source.close()
    assert not first.complete and 10 <= first.stored < 40, first
    second = sync(coll, server)
    assert second.complete and first.stored + second.stored == 40, (first, second)
    assert len(found(coll, "mammoth")) == 40
    assert len(coll.under("imap://", "imap")) == 40


def test_every_kind_of_source_is_one_the_query_language_and_the_settings_know() -> None:
    from deskdex.protocol import SOURCES
    from deskdex.settings import SOURCE_SCHEMES
    from deskdex.sources import SCHEMES

    assert set(SCHEMES) == set(SOURCE_SCHEMES)
    for scheme in SCHEMES:
        source = open_source(f"{scheme}://u@example.org/share", lambda: "")
        assert source.kind in SOURCES and source.prefix.startswith(f"{scheme}://")


def test_a_source_url_keeps_no_password_and_names_a_server() -> None:
    assert normalise("IMAPS://Alice@Mail.Example.ORG/") == "imaps://Alice@mail.example.org"
    for bad, why in (("imap://alice:pw@example.org", "in clear"), ("ftp://example.org", "not a source"),
                     ("imap:///INBOX", "no server")):
        with pytest.raises(ConfigError, match=why):
            normalise(bad)
    with pytest.raises(ConfigError, match="no password"):
        check("sources", [{"url": "imap://alice:pw@example.org"}])
    with pytest.raises(ConfigError, match="unknown key"):
        check("sources", [{"url": "imap://alice@example.org", "password": "pw"}])


def test_a_password_command_gives_the_password_and_its_failure_says_why(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cret\nignored\n")
    assert password_of(SourceEntry("imap://a@h", password_command=f"cat {secret}")) == "s3cret"
    with pytest.raises(SourceRefused, match="failed .exit 1."):
        password_of(SourceEntry("imap://a@h", password_command=f"cat {tmp_path / 'missing'}"))
    with pytest.raises(SourceRefused, match="printed nothing"):
        password_of(SourceEntry("imap://a@h", password_command="true"))


def test_a_broken_attachment_fails_alone_and_its_message_is_found(server: ImapServer, coll: Collection) -> None:
    server.append("INBOX", sample_message("Scan", "the gazelle scan", attachment=("scan.pdf", b"%PDF-1.4 not a pdf")))
    report = sync(coll, server)
    assert report.stored == 1 and sum(report.failed.values()) == 1, report
    (uri, reason, message), = report.failures
    assert uri.endswith("#scan.pdf") and reason == "corrupt" and message, report.failures
    assert found(coll, "gazelle") == ["Scan"]
    member = coll.get(uri)
    assert member is not None and member.status == "failed" and member.parent == uri.rsplit("#", 1)[0]


def test_a_folder_named_with_uri_delimiters_and_accents_keeps_its_messages_apart(
        server: ImapServer, coll: Collection) -> None:
    # "#" separates members, ";" the RFC 5092 parameters, "/" folders: each stays the folder name's own.
    odd = "Réunions #1; Q&A"
    message = sample_message("Agenda", "the axolotl agenda")
    server.append(odd, message)
    server.append("Réunions", sample_message("Other", "a different folder"))
    report = sync(coll, server)
    assert report.stored == 2 and not report.failed, report
    (uri,) = [u for u, *_ in coll.under("imap://", "imap") if "%231" in u]
    assert "%23" in uri and "%3B" in uri and "#" not in uri and uri.endswith(";UID=1")
    assert found(coll, "axolotl") == ["Agenda"]
    source = open_source(server.url, lambda: server.password)
    try:
        name, data = source.original(uri)
    finally:
        source.close()
    assert name == "message-1.eml" and data == message
    assert sync(coll, server).fetched == 0
