"""A folder of a network share synced into a real collection: a real Samba (tests/smb_server.py) on
127.0.0.1, through deskdex.pipeline's SourceSync, as the daemon and `deskdex source sync` run it; and
the evaluation of a share's ACLs into local readers (deskdex.sources.sids), without a server."""

from __future__ import annotations

import grp
import json
import logging
import os
import pwd
import shutil
from pathlib import Path
from typing import Any, Iterator, NamedTuple

import pytest

from deskdex.converters import Limits
from deskdex.errors import NotFound, SourceRefused, SourceUnreachable
from deskdex.index import Collection, search_shards
from deskdex.pipeline import SourceSync, SyncReport
from deskdex.sources import Options, RemoteSource, open_source
from deskdex.sources import sids
from deskdex.sources.sids import Ace, SidMap, readers

from .accounts import missing_tools  # noqa: F401 - puts this module in conftest's "accounts" xdist group (useradd)
from .conftest import make_docx, make_pdf
from .smb_server import SmbServer, samba_missing, unix_account

PASSWORDS = {"alice": "alice-pw-1", "bob": "bob-pw-2", "crawler": "crawler-pw-3"}


class Accounts(NamedTuple):
    alice: pwd.struct_passwd
    bob: pwd.struct_passwd
    crawler: pwd.struct_passwd


@pytest.fixture(scope="module")
def accounts() -> Iterator[Accounts]:
    if why := samba_missing():
        pytest.skip(why)
    with unix_account("alice") as a, unix_account("bob") as b, unix_account("crawler") as c:
        yield Accounts(a, b, c)


@pytest.fixture
def server(tmp_path: Path, accounts: Accounts) -> Iterator[SmbServer]:
    with SmbServer(tmp_path / "smb") as s:
        s.add_user(accounts.alice.pw_name, PASSWORDS["alice"])
        yield s


def url(server: SmbServer, user: str, path: str = "") -> str:
    return server.url(path).replace("smb://", f"smb://{user}@", 1)


def as_alice(server: SmbServer, accounts: Accounts, path: str = "", password: str = PASSWORDS["alice"],
             **options: Any) -> RemoteSource:
    return open_source(url(server, accounts.alice.pw_name, path), lambda: password, timeout=10,
                       options=Options(**options))


def sync(coll: Collection, source: RemoteSource, **kw: Any) -> SyncReport:
    return SourceSync(coll, **kw).run(source)


def sync_once(coll: Collection, source: RemoteSource, **kw: Any) -> SyncReport:
    try:
        return sync(coll, source, **kw)
    finally:
        source.close()


def found(coll: Collection, query: str, reader: int | None = None) -> list[str]:
    """The file names of the documents holding ``query``'s words (for ``reader``: those they may read)."""
    hits = search_shards([coll], query, limit=100, words=True, collapse=False, reader=reader)["hits"]
    return sorted(h["path"].rsplit("/", 1)[1] for h in hits)


def uris(coll: Collection) -> list[str]:
    return sorted(uri for uri, *_ in coll.under("smb://", "smb"))


def test_files_of_the_share_and_its_subfolders_are_found(server: SmbServer, accounts: Accounts, coll: Collection,
                                                         tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "budget.pdf", "Budget", "Bob", ["The walrus budget for the coming year."])
    docx = make_docx(tmp_path / "plan.docx", "Plan", "Bob", "Plan", ["A narwhal migration plan in detail."])
    server.put("budget.pdf", pdf.read_bytes())
    server.put("Reports/Q1/plan.docx", docx.read_bytes())
    server.put("Reports/notes.txt", b"the okapi figures are ready\n")
    server.put("Reports/odd #1 %é.txt", b"a quetzal hides here\n")

    source = as_alice(server, accounts)
    assert source.prefix == f"smb://127.0.0.1:{server.port}/docs/"
    report = sync_once(coll, source)
    assert report.complete and report.folders == 3 and report.fetched == 4 and report.stored == 4, report
    assert not report.failed, report.failures
    assert found(coll, "walrus") == ["budget.pdf"]
    assert found(coll, "narwhal") == ["plan.docx"]
    assert found(coll, "okapi") == ["notes.txt"]
    assert found(coll, "quetzal") == ["odd #1 %é.txt"]
    base = f"smb://127.0.0.1:{server.port}/docs/"
    assert uris(coll) == [base + "Reports/Q1/plan.docx", base + "Reports/notes.txt", base + "Reports/odd%20%231%20%25%C3%A9.txt",
                          base + "budget.pdf"]
    row = coll.get(base + "Reports/Q1/plan.docx")
    assert row is not None and row.source == "smb" and row.title == "Plan" and row.path == base + "Reports/Q1/plan.docx"
    assert row.size == len(docx.read_bytes()) and row.readers is None  # rights only in enterprise mode
    odd = coll.get(base + "Reports/odd%20%231%20%25%C3%A9.txt")
    assert odd is not None and odd.path == base + "Reports/odd #1 %é.txt" and odd.parent is None

    # The original, as the share holds it now; nothing outside the source's folder
    assert source.original(base + "Reports/odd%20%231%20%25%C3%A9.txt") == ("odd #1 %é.txt", b"a quetzal hides here\n")
    with pytest.raises(NotFound):
        source.original(base + "Reports/gone.txt")
    sub = as_alice(server, accounts, "Reports")
    try:
        with pytest.raises(NotFound):
            sub.original(sub.prefix + "../budget.pdf")
        with pytest.raises(NotFound):
            sub.original(base + "budget.pdf")
    finally:
        sub.close()
        source.close()


def test_a_source_of_one_folder_keeps_to_it(server: SmbServer, accounts: Accounts, coll: Collection) -> None:
    server.put("top.txt", b"an aardvark on top\n")
    server.put("Team/Reports/q1.txt", b"a bonobo report\n")
    server.put("Team/notes.txt", b"a coelacanth note\n")
    # the account from the options (as the config's user), not the URL
    source = open_source(server.url("Team"), lambda: PASSWORDS["alice"],
                         options=Options(user=accounts.alice.pw_name))
    assert source.prefix == f"smb://127.0.0.1:{server.port}/docs/Team/"
    report = sync_once(coll, source)
    assert report.complete and report.stored == 2, report
    assert found(coll, "aardvark") == [] and found(coll, "bonobo") == ["q1.txt"] and found(coll, "coelacanth") == ["notes.txt"]
    with pytest.raises(SourceRefused, match="no folder Nowhere on the share docs"):
        sync_once(coll, as_alice(server, accounts, "Nowhere"))
    assert len(uris(coll)) == 2


def test_a_second_sync_fetches_nothing_then_follows_changed_deleted_and_unlistable_files(
        server: SmbServer, accounts: Accounts, coll: Collection) -> None:
    server.put("a.txt", b"an aardvark\n", mtime=1_600_000_000)
    server.put("sub/b.txt", b"a bonobo\n")
    server.put("sub/deeper/c.txt", b"a coelacanth\n")
    server.put("other/d.txt", b"a dugong\n")
    server.put("other/more/e.txt", b"an echidna\n")
    server.put("locked/f.txt", b"a fossa\n")
    server.put("locked/inner/g.txt", b"a gharial\n")
    assert sync_once(coll, as_alice(server, accounts)).stored == 7

    source = as_alice(server, accounts)
    try:
        again = sync(coll, source)
        assert (again.fetched, again.removed, again.folders, again.complete) == (0, 0, 7, True), again

        server.put("a.txt", b"an axolotl, much longer than before\n", mtime=1_600_000_100)
        (server.path / "sub" / "b.txt").unlink()
        shutil.rmtree(server.path / "other")
        (server.path / "locked").chmod(0o700)  # root's: alice can no longer list it
        (server.path / "locked" / "f.txt").unlink()  # unseen: what is indexed of it stays
        changed = sync(coll, source)
        assert changed.complete and changed.fetched == 1 and changed.removed == 3, changed
        assert changed.unlisted_folders == ["locked"], changed
        assert found(coll, "aardvark") == [] and found(coll, "axolotl") == ["a.txt"]
        assert found(coll, "bonobo") == [] and found(coll, "dugong") == [] and found(coll, "echidna") == []
        assert found(coll, "coelacanth") == ["c.txt"]  # in a subfolder of a folder that lost a file: kept
        assert found(coll, "fossa") == ["f.txt"] and found(coll, "gharial") == ["g.txt"]
        row = coll.get(source.prefix + "a.txt")
        assert row is not None and row.mtime == 1_600_000_100 and row.size == len(b"an axolotl, much longer than before\n")

        (server.path / "locked").chmod(0o755)
        shutil.rmtree(server.path / "sub")
        back = sync(coll, source)
        assert back.complete and back.fetched == 0 and back.removed == 2 and not back.unlisted_folders, back
        assert found(coll, "fossa") == [] and found(coll, "coelacanth") == [] and found(coll, "gharial") == ["g.txt"]
        assert sync(coll, source).fetched == 0
    finally:
        source.close()


def test_a_server_that_goes_away_is_unreachable_and_nothing_indexed_from_it_is_lost(
        server: SmbServer, accounts: Accounts, coll: Collection) -> None:
    server.put("kept.txt", b"a tapir\n")
    server.put("sub/kept.txt", b"a tapir calf\n")
    source = as_alice(server, accounts)
    try:
        assert sync(coll, source).stored == 2
        server.pause()
        try:
            for _ in range(2):  # the pooled connection cut, then no connection at all
                with pytest.raises(SourceUnreachable, match=f"127.0.0.1:{server.port}"):
                    sync(coll, source)
            with pytest.raises(SourceUnreachable, match="cannot connect"):
                sync_once(coll, as_alice(server, accounts))
            assert len(found(coll, "tapir")) == 2 and len(uris(coll)) == 2
        finally:
            server.resume()
        server.put("back.txt", b"a wombat\n")
        report = sync(coll, source)
        assert report.complete and report.stored == 1 and report.removed == 0, report
        assert found(coll, "wombat") == ["back.txt"] and len(found(coll, "tapir")) == 2
    finally:
        source.close()


def test_a_wrong_password_an_unknown_account_or_share_is_refused(server: SmbServer, accounts: Accounts,
                                                                 coll: Collection) -> None:
    server.put("secret.txt", b"a lemur\n")
    with pytest.raises(SourceRefused, match=f"refused the login of {accounts.alice.pw_name}"):
        sync_once(coll, as_alice(server, accounts, password="not-the-password"))
    with pytest.raises(SourceRefused, match=f"refused the login of {accounts.bob.pw_name}"):  # not in the passdb
        sync_once(coll, open_source(url(server, accounts.bob.pw_name), lambda: PASSWORDS["bob"]))
    with pytest.raises(SourceRefused, match="no share nope on 127.0.0.1"):
        sync_once(coll, open_source(server.url().replace("/docs/", "/nope/"), lambda: PASSWORDS["alice"],
                                    options=Options(user=accounts.alice.pw_name)))
    with pytest.raises(SourceRefused, match="no account to log in as"):
        sync_once(coll, open_source(server.url(), lambda: "x"))
    assert found(coll, "lemur") == [] and uris(coll) == []


def test_a_file_over_the_size_limit_or_not_readable_fails_alone(server: SmbServer, accounts: Accounts,
                                                                coll: Collection) -> None:
    server.add_user(accounts.bob.pw_name, PASSWORDS["bob"])
    server.put("huge.txt", b"an ibex " + b"x" * 5000)
    server.put("small.txt", b"a jerboa\n")
    server.put("bobs.txt", b"a kinkajou of bob's\n", owner=accounts.bob.pw_name, mode=0o600)
    report = sync_once(coll, as_alice(server, accounts), limits=Limits(file_bytes=2000))
    assert report.failed == {"too_large": 1, "unreadable": 1} and report.stored == 1, report
    assert found(coll, "jerboa") == ["small.txt"] and found(coll, "kinkajou") == []
    failed = {r.uri.rsplit("/", 1)[1]: r for r in coll.catalog.rows("status='failed'")}
    assert set(failed) == {"huge.txt", "bobs.txt"}
    assert failed["huge.txt"].reason == "too_large" and failed["huge.txt"].size > 2000
    assert failed["bobs.txt"].reason == "unreadable" and "permission denied on the share" in (failed["bobs.txt"].error or "")
    assert sync_once(coll, as_alice(server, accounts), limits=Limits(file_bytes=2000)).fetched == 0  # until they change

    # gone between the listing and the fetch: None, which the sync skips (the next listing forgets it)
    source = as_alice(server, accounts)
    try:
        root = next(source.folders())
        listed = {i.name: i for i in source.items(root) or []}
        (server.path / "small.txt").unlink()
        assert list(source.fetch(root, [listed["small.txt"]], 2000)) == [(listed["small.txt"], None)]
    finally:
        source.close()


def test_enterprise_mode_gives_each_file_the_readers_its_acl_names(server: SmbServer, accounts: Accounts,
                                                                   coll: Collection, tmp_path: Path) -> None:
    alice, bob, crawler = accounts
    alice_sid = server.sid(alice.pw_name)
    bob_sid = server.add_user(bob.pw_name, PASSWORDS["bob"])
    server.add_user(crawler.pw_name, PASSWORDS["crawler"], admin=True)  # reads every file and descriptor
    server.put("alice.txt", b"the marmot plan of alice\n", owner=alice.pw_name, mode=0o600)
    server.put("private/bob.txt", b"the marmot plan of bob\n", owner=bob.pw_name, mode=0o600)
    server.put("public.txt", b"the marmot plan of all\n", mode=0o644)

    source = open_source(url(server, crawler.pw_name), lambda: PASSWORDS["crawler"],
                         options=Options(rights=True, sid_map={alice_sid: alice.pw_name, bob_sid: bob.pw_name}))
    report = sync_once(coll, source)
    assert report.complete and report.stored == 3 and not report.failed, report
    rows = {r.uri.rsplit("/", 1)[1]: json.loads(r.readers or "null") for r in coll.catalog.rows()}
    assert rows["alice.txt"] == {"uids": [alice.pw_uid], "everyone": False}
    assert rows["bob.txt"] == {"uids": [bob.pw_uid], "everyone": False}
    assert rows["public.txt"]["everyone"] is True and 0 in rows["public.txt"]["uids"]  # root owns it

    assert found(coll, "marmot") == ["alice.txt", "bob.txt", "public.txt"]
    assert found(coll, "marmot", reader=alice.pw_uid) == ["alice.txt", "public.txt"]
    assert found(coll, "marmot", reader=bob.pw_uid) == ["bob.txt", "public.txt"]
    assert found(coll, "marmot", reader=crawler.pw_uid) == ["public.txt"]

    # Without the map, Samba's passdb SIDs are nobody here: only the world-readable file is anyone's
    coll2 = Collection.open(str(tmp_path / "plain"), writable=True)
    try:
        sync_once(coll2, open_source(url(server, crawler.pw_name), lambda: PASSWORDS["crawler"],
                                     options=Options(rights=True)))
        assert found(coll2, "marmot", reader=alice.pw_uid) == ["public.txt"]
    finally:
        coll2.close()


def test_rights_that_cannot_be_asked_for_make_each_file_unreadable_not_a_crash(
        server: SmbServer, accounts: Accounts, coll: Collection, monkeypatch: pytest.MonkeyPatch) -> None:
    from smbprotocol.open import InfoAdditionalInformation

    server.put("one.txt", b"a numbat\n")
    server.put("sub/two.txt", b"a numbat again\n")
    # as a future smbprotocol that mends its spelling would have it
    monkeypatch.delattr(InfoAdditionalInformation, "OWNER_SECURTIY_INFORMATION")
    report = sync_once(coll, as_alice(server, accounts, rights=True))
    assert report.complete and report.stored == 0 and report.failed == {"unreadable": 2}, report
    assert all("its rights could not be read" in message and "OWNER_SECURTIY_INFORMATION" in message
               for _uri, _reason, message in report.failures), report.failures
    assert found(coll, "numbat") == []


# -- the ACL's evaluation, without a server --------------------------------------------------------------

ALICE, BOB, CAROL = "S-1-5-21-1-2-3-1000", "S-1-5-21-1-2-3-1001", "S-1-5-21-1-2-3-1002"
TEAM = "S-1-5-21-1-2-3-2000"
UIDS = {ALICE: frozenset({1000}), BOB: frozenset({1001}), CAROL: frozenset({1002}), TEAM: frozenset({1000, 1001})}
READ, WRITE = 0x120089, 0x2


def _of(sid: str) -> frozenset[int]:
    return UIDS.get(sid, frozenset())


def test_an_allow_ace_with_read_data_makes_a_reader_and_a_mask_without_it_does_not() -> None:
    assert readers([Ace(True, ALICE, 0x12019F), Ace(True, BOB, WRITE), Ace(True, CAROL, 0)], _of) == \
        (frozenset({1000}), False)
    assert readers([Ace(True, ALICE, 0x80000000), Ace(True, BOB, 0x10000000)], _of) == (frozenset({1000, 1001}), False)
    assert readers([Ace(True, sids.EVERYONE, 0)], _of) == (frozenset(), False)  # chmod 600: Everyone's empty ACE
    assert readers([Ace(True, sids.EVERYONE, READ)], _of) == (frozenset(), True)
    assert readers([Ace(True, sids.AUTHENTICATED_USERS, READ)], _of) == (frozenset(), True)
    assert readers([Ace(True, ALICE, READ, flags=sids.INHERIT_ONLY_ACE)], _of) == (frozenset(), False)


def test_the_first_ace_that_decides_wins_in_dacl_order() -> None:
    # deny before allow: bob is out of the team; allow before deny: the deny comes too late
    assert readers([Ace(False, BOB, READ), Ace(True, TEAM, READ)], _of) == (frozenset({1000}), False)
    assert readers([Ace(True, TEAM, READ), Ace(False, BOB, READ)], _of) == (frozenset({1000, 1001}), False)
    # a deny of something else than reading denies nothing here
    assert readers([Ace(False, BOB, WRITE), Ace(True, TEAM, READ)], _of) == (frozenset({1000, 1001}), False)
    # Everyone after a deny is not everyone (the index cannot say "everyone but bob"); before it, it is
    assert readers([Ace(False, BOB, READ), Ace(True, sids.EVERYONE, READ)], _of) == (frozenset(), False)
    assert readers([Ace(True, sids.EVERYONE, READ), Ace(False, BOB, READ)], _of) == (frozenset(), True)
    # Everyone denied: only who was granted before
    assert readers([Ace(True, ALICE, READ), Ace(False, sids.EVERYONE, READ), Ace(True, BOB, READ)], _of) == \
        (frozenset({1000}), False)
    # a deny of a SID that is nobody known here may be anyone: nobody after it
    assert readers([Ace(True, ALICE, READ), Ace(False, "S-1-5-21-9-9-9-513", READ), Ace(True, BOB, READ)], _of) == \
        (frozenset({1000}), False)


def test_a_null_dacl_is_everyone_and_an_empty_one_nobody() -> None:
    assert readers(None, _of) == (frozenset(), True)
    assert readers([], _of) == (frozenset(), False)


def test_sids_of_the_map_of_samba_and_of_unix_groups_become_local_accounts(monkeypatch: pytest.MonkeyPatch,
                                                                           caplog: pytest.LogCaptureFixture) -> None:
    def entry(name: str, uid: int, gid: int) -> pwd.struct_passwd:
        return pwd.struct_passwd((name, "x", uid, gid, "", "/", "/bin/sh"))

    people = [entry("ann", 2001, 3000), entry("ben", 2002, 3000), entry("cat", 2003, 3001), entry("dan", 2004, 3002)]
    by_name = {p.pw_name: p for p in people}

    def getpwnam(name: str) -> pwd.struct_passwd:
        return by_name[name]

    def getgrgid(gid: int) -> grp.struct_group:
        if gid == 3001:
            return grp.struct_group(("crew", "x", 3001, ["dan", "ghost"]))  # dan by membership; ghost: no account
        raise KeyError(gid)

    monkeypatch.setattr(pwd, "getpwall", lambda: people)
    monkeypatch.setattr(pwd, "getpwnam", getpwnam)
    monkeypatch.setattr(grp, "getgrgid", getgrgid)
    m = SidMap({ALICE: "ann", BOB: "nobody-here", CAROL: "nobody-here"}, winbind=False)
    assert m(ALICE) == {2001}
    with caplog.at_level(logging.WARNING, logger="deskdex.sources.sids"):
        assert m(BOB) == frozenset() and m(CAROL) == frozenset()
    assert sum("nobody-here" in r.getMessage() for r in caplog.records) == 1  # said once
    assert m("S-1-22-1-2003") == {2003}
    assert m("S-1-22-2-3000") == {2001, 2002}  # primary group
    assert m("S-1-22-2-3001") == {2003, 2004}  # primary group and members
    assert m("S-1-22-2-4242") == frozenset() and m("S-1-22-1-x") == frozenset()
    assert m(sids.EVERYONE) == frozenset() and m("S-1-5-21-7-7-7-1000") == frozenset()  # not mapped: nobody
    # the group's read ACE gives its accounts, the owner's map entry its account
    group_read = [Ace(True, ALICE, 0x12019F), Ace(False, "S-1-22-1-2002", READ), Ace(True, "S-1-22-2-3000", READ)]
    assert readers(group_read, m) == (frozenset({2001}), False)
    assert readers([Ace(True, "S-1-22-2-3001", READ)], m) == (frozenset({2003, 2004}), False)


def test_winbind_maps_what_else_is_not_mapped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # No winbind runs on a test machine (it needs a domain to join): a stand-in wbinfo answers as it would.
    wbinfo = tmp_path / "wbinfo"
    log = tmp_path / "asked"
    wbinfo.write_text(f"""#!/bin/sh
echo "$1 $2" >> {log}
case "$1 $2" in
  "--sid-to-uid S-1-5-21-5-5-5-1104") echo 1104 ;;
  "--sid-to-gid S-1-5-21-5-5-5-513") echo 0 ;;
  *) echo "failed to call wbcSidToUid" >&2; exit 1 ;;
esac
""")
    wbinfo.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    m = SidMap()
    assert m.wbinfo == str(wbinfo)
    assert m("S-1-5-21-5-5-5-1104") == {1104}
    assert 0 in m("S-1-5-21-5-5-5-513")  # a group: its accounts (root's group holds root)
    assert m("S-1-5-21-5-5-5-9") == frozenset()
    assert m("S-1-5-21-5-5-5-1104") == {1104} and m("S-1-5-21-5-5-5-9") == frozenset()  # remembered
    assert log.read_text().count("S-1-5-21-5-5-5-1104") == 1 and log.read_text().count("S-1-5-21-5-5-5-9") == 2
    assert m("S-1-22-1-7") == {7} and "S-1-22-1-7" not in log.read_text()  # Samba's own: no need to ask


@pytest.mark.slow
def test_a_share_added_from_the_command_line_is_kept_in_sync_by_the_daemon(
        server: SmbServer, accounts: Accounts, tmp_path: Path, home: Path) -> None:
    import base64
    import time

    from .conftest import CLI
    from .daemon_fixture import DaemonProcess

    server.put("team/minutes.txt", b"the capybara minutes of Monday", owner=accounts.alice.pw_name)
    pdf = make_pdf(tmp_path / "plan.pdf", "Plan", "Alice", ["A marmoset migration plan."])
    server.put("team/sub/plan.pdf", pdf.read_bytes(), owner=accounts.alice.pw_name)
    secret = tmp_path / "secret"
    secret.write_text(PASSWORDS["alice"] + "\n")
    docs = tmp_path / "docs"
    docs.mkdir()
    daemon = DaemonProcess(home, [docs])
    cli = CLI(home)
    cli.run("source", "add", server.url("team"), "--user", accounts.alice.pw_name, "--password-command", f"cat {secret}")
    daemon.start(wait=False)

    def titles(query: str) -> list[str]:
        return sorted(h["title"] or h["path"] for h in daemon.call("search", query=query, limit=50, words=True)["hits"])

    def eventually(query: str, expected: list[str]) -> None:
        patience = daemon.patience(60)
        while titles(query) != expected and not patience.over():
            time.sleep(0.2)
        assert titles(query) == expected, (query, daemon.log.read_text()[-3000:])

    try:
        daemon.wait_for(lambda st: bool(st.get("sources")) and st["sources"][0]["state"] == "ok", quiet=60,
                        what="the share's first sync")
        eventually("capybara", ["the capybara minutes of Monday"])
        eventually("marmoset", ["Plan"])
        hit = daemon.call("search", query="marmoset", words=True)["hits"][0]
        assert hit["source"] == "smb" and hit["uri"] == server.url("team/sub/plan.pdf")
        assert base64.b64decode(daemon.call("original", uri=hit["uri"])["data"]) == pdf.read_bytes()

        # A colleague saves a file to the share: the server's change notification brings it, nobody
        # asks (the interval is 300 s). Through SMB, as users change a share: Samba notifies those
        # changes for a whole tree, but of files written on its own disk only in the folder watched.
        import smbclient

        pool: dict[str, Any] = {}
        try:
            with smbclient.open_file(server.unc("team/sub/new.txt"), mode="wb", username=accounts.alice.pw_name,
                                     password=PASSWORDS["alice"], port=server.port, connection_cache=pool) as f:
                f.write(b"a fresh okapi note")
        finally:
            smbclient.reset_connection_cache(fail_on_error=False, connection_cache=pool)
        eventually("okapi", ["a fresh okapi note"])

        server.put("team/minutes.txt", b"the tapir minutes of Tuesday", owner=accounts.alice.pw_name,
                   mtime=time.time() + 5)
        os.remove(server.path / "team" / "sub" / "plan.pdf")
        synced = json.loads(cli.run("source", "sync", "--json").stdout)
        assert synced["sources"][0]["state"] == "ok", synced
        assert titles("tapir") == ["the tapir minutes of Tuesday"] and titles("capybara") == []
        assert titles("marmoset") == []
        assert daemon.call("status")["sources"][0]["documents"] == 2
    finally:
        assert daemon.stop() == 0


@pytest.mark.slow
def test_an_enterprise_daemon_lets_each_account_find_the_share_files_its_acls_let_it_read(
        tmp_path: Path, open_dir: Path) -> None:
    """Real accounts with homes (useradd -m), a real Samba whose files have different ACLs for two of
    them, the enterprise-mode daemon (--system) syncing the share as an indexing account, and the
    real CLI run as each account (setpriv): each finds what the share lets it read, and nothing else."""
    from .accounts import IS_ROOT, Users, clients_or_skip, run_as
    from .daemon_fixture import DaemonProcess

    if why := samba_missing():
        pytest.skip(why)
    if not IS_ROOT:
        pytest.skip("needs root: useradd, setpriv")
    py, lib = clients_or_skip()
    users = Users()
    daemon = None
    try:
        pa, pb = users.create()
        with unix_account("crawler") as crawler, SmbServer(tmp_path / "smb") as srv:
            sids = {srv.add_user(users.a, "a-pw-1"): users.a, srv.add_user(users.b, "b-pw-2"): users.b}
            srv.add_user(crawler.pw_name, PASSWORDS["crawler"], admin=True)
            srv.put("team/a_secret.txt", b"jackal alpha", owner=users.a, mode=0o600)
            srv.put("team/b_secret.txt", b"jackal bravo", owner=users.b, mode=0o600)
            srv.put("team/everyone.txt", b"jackal charlie", owner=users.b, mode=0o644)
            secret = tmp_path / "secret"
            secret.write_text(PASSWORDS["crawler"] + "\n")
            home = open_dir / "home"  # the accounts' clients read its config and reach its socket
            names = ", ".join(json.dumps(n) for n in (users.a, users.b))
            sid_map = "".join(f"{json.dumps(sid)} = {json.dumps(name)}\n" for sid, name in sids.items())
            config = (f"accounts = [{names}]\n[[sources]]\nurl = {json.dumps(url(srv, crawler.pw_name, 'team'))}\n"
                      f"password_command = {json.dumps(f'cat {secret}')}\n[sid_map]\n{sid_map}")
            daemon = DaemonProcess(home, [], extra_config=config, args=("--system",)).start()
            daemon.wait_for(lambda st: bool(st.get("sources")) and st["sources"][0]["state"] == "ok"
                            and st["sources"][0]["documents"] == 3, quiet=60, what="the share's sync")

            def seen(user: str | None) -> set[str]:
                p = run_as(user, [py, "-m", "deskdex", "search", "jackal", "--json", "--limit", "50", "--home",
                                  str(home)], lib, Path(pa.pw_dir) if user == users.a else Path(pb.pw_dir) if user
                           else None)
                assert p.returncode == 0, p.stderr
                return {h["uri"].rsplit("/", 1)[-1] for h in json.loads(p.stdout)["hits"]}

            assert {h["uri"].rsplit("/", 1)[-1] for h in daemon.call("search", query="jackal", limit=50)["hits"]} \
                == {"a_secret.txt", "b_secret.txt", "everyone.txt"}
            assert seen(users.a) == {"a_secret.txt", "everyone.txt"}
            assert seen(users.b) == {"b_secret.txt", "everyone.txt"}
            assert seen(None) == {"everyone.txt"}
            # The message of a document another account may not read is that of one not indexed.
            p = run_as(users.a, [py, "-c", "import sys, deskdex.clients.client as c; c.call(sys.argv[1], 'original', "
                                 "uri=sys.argv[2])", daemon.socket, srv.url("team/b_secret.txt")],
                       lib, Path(pa.pw_dir))
            assert p.returncode != 0 and "no such document" in p.stderr, p.stderr
    finally:
        if daemon is not None:
            daemon.stop()
        users.remove()
