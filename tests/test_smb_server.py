"""tests/smb_server.py: the real smbd the SMB source tests talk to logs accounts in with their
passwords, lists and serves the share (files made on disk included, with their sizes and mtimes), takes
writes, reports each file's security descriptor with the SIDs of the accounts that may read it and
enforces it, comes back on the same port after it went away, and runs beside another one.

The client is smbprotocol's ``smbclient``, as the SMB source uses it: every call names the port and a
connection cache of the test's own, so no pooled connection outlives a test or crosses to another
server."""

from __future__ import annotations

import datetime
import os
import pwd
import socket
import subprocess
from pathlib import Path
from typing import Any, Iterator, NamedTuple

import pytest
import smbclient
from smbclient._io import SMBFileTransaction, SMBRawIO
from smbprotocol.exceptions import LogonFailure, SMBConnectionClosed, SMBOSError
from smbprotocol.file_info import InfoType
from smbprotocol.header import NtStatus
from smbprotocol.open import (
    FilePipePrinterAccessMask,
    InfoAdditionalInformation,
    SMB2QueryInfoRequest,
    SMB2QueryInfoResponse,
)
from smbprotocol.security_descriptor import AccessAllowedAce, SMB2CreateSDBuffer

from .accounts import missing_tools  # also puts this module in conftest's "accounts" xdist group
from .smb_server import SmbServer, samba_missing, unix_account

pytestmark = pytest.mark.skipif(samba_missing() != "", reason=samba_missing())

FILE_READ_DATA = 0x1
FILE_GENERIC_READ = 0x120089
PASSWORDS = {"alice": "alice-pw-1", "bob": "bob-pw-2", "crawler": "crawler-pw-3"}


class Accounts(NamedTuple):
    alice: str
    bob: str
    crawler: str


@pytest.fixture(scope="module")
def accounts() -> Iterator[Accounts]:
    with unix_account("alice") as a, unix_account("bob") as b, unix_account("crawler") as c:
        yield Accounts(a.pw_name, b.pw_name, c.pw_name)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[SmbServer]:
    with SmbServer(tmp_path / "smb") as s:
        yield s


@pytest.fixture
def cache() -> Iterator[dict[str, Any]]:
    """The test's own smbclient connection pool, closed at the end."""
    pool: dict[str, Any] = {}
    yield pool
    smbclient.reset_connection_cache(fail_on_error=False, connection_cache=pool)


def _password(accounts: Accounts, name: str) -> str:
    return PASSWORDS[accounts._fields[accounts.index(name)]]


def _as(server: SmbServer, accounts: Accounts, name: str, pool: dict[str, Any]) -> dict[str, Any]:
    """smbclient's keyword arguments for ``name``: passed on every call, so that a connection the pool
    has to make again (the server went away) logs in again."""
    return {"username": name, "password": _password(accounts, name), "port": server.port,
            "connection_cache": pool}


class Sd(NamedTuple):
    owner: str
    group: str
    allowed: dict[str, int]  # SID -> access mask of its allow ACEs
    denied: dict[str, int]


def _security(path: str, **kwargs: Any) -> Sd:
    """The file's security descriptor (owner, group, DACL) by SMB2 QUERY_INFO, in one compound request
    with the open (READ_CONTROL only) and the close. smbclient has no call for it."""
    raw = SMBRawIO(path, mode="r", share_access="rwd", desired_access=FilePipePrinterAccessMask.READ_CONTROL,
                   **kwargs)
    req = SMB2QueryInfoRequest()
    req["info_type"] = InfoType.SMB2_0_INFO_SECURITY
    req["output_buffer_length"] = 65536
    req["additional_information"] = (InfoAdditionalInformation.OWNER_SECURTIY_INFORMATION
                                     | InfoAdditionalInformation.GROUP_SECURITY_INFORMATION
                                     | InfoAdditionalInformation.DACL_SECURITY_INFORMATION)
    req["file_id"] = raw.fd.file_id  # the compound's "related" id: the handle the create opens

    def receive(request: Any) -> SMB2CreateSDBuffer:
        response = raw.fd.connection.receive(request)
        info = SMB2QueryInfoResponse()
        info.unpack(response["data"].get_value())
        sd = SMB2CreateSDBuffer()
        sd.unpack(info["buffer"].get_value())
        return sd

    with SMBFileTransaction(raw) as transaction:
        transaction += (req, receive)
    sd = transaction.results[0]
    allowed: dict[str, int] = {}
    denied: dict[str, int] = {}
    dacl = sd.get_dacl()
    for ace in dacl["aces"].get_value() if dacl is not None else []:
        if isinstance(ace, bytes):
            continue  # an ACE type smbprotocol does not parse (object, callback ACEs): Samba sends none
        into = allowed if isinstance(ace, AccessAllowedAce) else denied
        sid = str(ace["sid"])
        into[sid] = into.get(sid, 0) | ace["mask"].get_value()
    return Sd(str(sd.get_owner()), str(sd.get_group()), allowed, denied)


def _readers(sd: Sd) -> set[str]:
    return {sid for sid, mask in sd.allowed.items() if mask & FILE_READ_DATA and sid not in sd.denied}


def test_list_write_and_read(server: SmbServer, accounts: Accounts, cache: dict[str, Any]) -> None:
    assert server.host == "127.0.0.1" and server.share == "docs"
    assert server.url("Reports/Q1 plan.txt") == f"smb://127.0.0.1:{server.port}/docs/Reports/Q1%20plan.txt"
    assert server.unc("Reports/x.txt") == r"\\127.0.0.1\docs\Reports\x.txt"
    server.add_user(accounts.alice, _password(accounts, accounts.alice))
    kw = _as(server, accounts, accounts.alice, cache)
    smbclient.register_session(server.host, username=accounts.alice, password=_password(accounts, accounts.alice),
                               port=server.port, connection_cache=cache)

    when = 1_600_000_000  # 2020-09-13 12:26:40 UTC
    server.put("report.txt", b"quarterly numbers\n", mtime=when)
    server.put("Reports/Q1 plan.txt", b"plan\n", mtime=when + 60)
    listing = {e.name: e for e in smbclient.scandir(server.unc(), **kw)}
    assert set(listing) == {"report.txt", "Reports"}
    assert listing["Reports"].is_dir() and listing["report.txt"].is_file()
    info = listing["report.txt"].smb_info  # from the listing itself, no request of its own
    assert info.end_of_file == len(b"quarterly numbers\n")
    assert info.last_write_time == datetime.datetime.fromtimestamp(when, datetime.timezone.utc)
    st = smbclient.stat(server.unc("Reports/Q1 plan.txt"), **kw)
    assert (st.st_size, st.st_mtime) == (5, when + 60)
    assert smbclient.listdir(server.unc("Reports"), **kw) == ["Q1 plan.txt"]

    # written over SMB: on disk, as the account
    with smbclient.open_file(server.unc("Reports/from-alice.txt"), mode="wb", **kw) as f:
        f.write(b"written by alice\n")
    on_disk = server.path / "Reports" / "from-alice.txt"
    assert on_disk.read_bytes() == b"written by alice\n"
    assert on_disk.stat().st_uid == pwd.getpwnam(accounts.alice).pw_uid
    with smbclient.open_file(server.unc("report.txt"), mode="rb", **kw) as f:
        assert f.read() == b"quarterly numbers\n"

    # made on disk while the session is open: the next listing has it, and a vanished one is gone
    server.put("later.txt", b"later\n")
    (server.path / "report.txt").unlink()
    assert sorted(smbclient.listdir(server.unc(), **kw)) == ["Reports", "later.txt"]
    with pytest.raises(SMBOSError) as gone:
        smbclient.open_file(server.unc("report.txt"), mode="rb", **kw)
    assert gone.value.ntstatus == NtStatus.STATUS_OBJECT_NAME_NOT_FOUND


def test_security_descriptors_name_who_may_read(server: SmbServer, accounts: Accounts,
                                                cache: dict[str, Any]) -> None:
    alice = server.add_user(accounts.alice, _password(accounts, accounts.alice))
    bob = server.add_user(accounts.bob, _password(accounts, accounts.bob))
    server.add_user(accounts.crawler, _password(accounts, accounts.crawler), admin=True)
    assert alice.startswith("S-1-5-21-") and bob.startswith("S-1-5-21-") and alice != bob
    assert alice.rsplit("-", 1)[0] == bob.rsplit("-", 1)[0]  # the server's machine SID, then the RID
    server.put("alice.txt", b"for alice only\n", owner=accounts.alice, mode=0o600)
    server.put("bob.txt", b"for bob only\n", owner=accounts.bob, mode=0o600)
    server.put("public.txt", b"for everyone\n", mode=0o644)
    alice_gid = (server.path / "alice.txt").stat().st_gid

    # the crawler (an admin user of the share) reads every descriptor: who owns and who may read
    crawler = _as(server, accounts, accounts.crawler, cache)
    a = _security(server.unc("alice.txt"), **crawler)
    assert a.owner == alice and a.group == f"S-1-22-2-{alice_gid}"
    assert _readers(a) == {alice}
    assert a.allowed[alice] == 0x12019F and a.allowed["S-1-1-0"] == 0  # chmod 600: Everyone's ACE is empty
    b = _security(server.unc("bob.txt"), **crawler)
    assert b.owner == bob and _readers(b) == {bob}
    p = _security(server.unc("public.txt"), **crawler)
    assert p.owner == "S-1-22-1-0"  # root is in no passdb: its Unix SID
    assert "S-1-1-0" in _readers(p)
    with smbclient.open_file(server.unc("bob.txt"), mode="rb", **crawler) as f:
        assert f.read() == b"for bob only\n"

    # and smbd enforces it as each account
    as_alice = _as(server, accounts, accounts.alice, cache)
    with smbclient.open_file(server.unc("alice.txt"), mode="rb", **as_alice) as f:
        assert f.read() == b"for alice only\n"
    assert _readers(_security(server.unc("alice.txt"), **as_alice)) == {alice}
    assert "bob.txt" in smbclient.listdir(server.unc(), **as_alice)  # listed, not readable
    for denied in (lambda: smbclient.open_file(server.unc("bob.txt"), mode="rb", **as_alice),
                   lambda: _security(server.unc("bob.txt"), **as_alice)):
        with pytest.raises(SMBOSError) as refused:
            denied()
        assert refused.value.ntstatus == NtStatus.STATUS_ACCESS_DENIED
    as_bob = _as(server, accounts, accounts.bob, cache)
    with pytest.raises(SMBOSError) as refused:
        smbclient.open_file(server.unc("alice.txt"), mode="rb", **as_bob)
    assert refused.value.ntstatus == NtStatus.STATUS_ACCESS_DENIED


@pytest.mark.skipif("setfacl" in missing_tools(), reason="setfacl is missing (Debian package acl)")
def test_posix_acl_entries_become_aces(server: SmbServer, accounts: Accounts, cache: dict[str, Any]) -> None:
    alice = server.add_user(accounts.alice, _password(accounts, accounts.alice))
    bob = server.add_user(accounts.bob, _password(accounts, accounts.bob))
    shared = server.put("shared.txt", b"for both\n", mode=0o600)  # root's
    subprocess.run(["setfacl", "-m", f"u:{accounts.alice}:r,u:{accounts.bob}:r", str(shared)], check=True)
    sd = _security(server.unc("shared.txt"), **_as(server, accounts, accounts.bob, cache))
    assert sd.owner == "S-1-22-1-0"
    assert sd.allowed[alice] == sd.allowed[bob] == FILE_GENERIC_READ
    assert _readers(sd) == {"S-1-22-1-0", alice, bob}
    for name in (accounts.alice, accounts.bob):
        with smbclient.open_file(server.unc("shared.txt"), mode="rb", **_as(server, accounts, name, cache)) as f:
            assert f.read() == b"for both\n"


def test_wrong_password_and_unknown_account(server: SmbServer, accounts: Accounts,
                                            cache: dict[str, Any]) -> None:
    server.add_user(accounts.alice, _password(accounts, accounts.alice))
    for user, password in ((accounts.alice, "not-the-password"), (accounts.bob, _password(accounts, accounts.bob))):
        # bob is a Unix account but not in this server's passdb
        with pytest.raises(LogonFailure):
            smbclient.register_session(server.host, username=user, password=password, port=server.port,
                                       connection_cache=cache)


def test_pause_and_resume(server: SmbServer, accounts: Accounts, cache: dict[str, Any]) -> None:
    server.add_user(accounts.alice, _password(accounts, accounts.alice))
    server.put("kept.txt", b"kept\n")
    kw = _as(server, accounts, accounts.alice, cache)
    assert smbclient.listdir(server.unc(), **kw) == ["kept.txt"]
    port = server.port

    server.pause()
    assert not server.running
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((server.host, port), timeout=5).close()
    # The pooled connection was cut: SMBConnectionClosed when it is used before its reader thread saw
    # the end, else (and from then on) smbclient makes the connection again, and says so with a
    # ValueError around the refusal.
    with pytest.raises((SMBConnectionClosed, ValueError)):
        smbclient.listdir(server.unc(), **kw)
    with pytest.raises(ValueError, match="Failed to connect") as down:
        smbclient.listdir(server.unc(), **kw)
    assert isinstance(down.value.__cause__, ConnectionRefusedError)

    server.resume()
    assert server.running and server.port == port
    assert smbclient.listdir(server.unc(), **kw) == ["kept.txt"]  # the same pool connects again
    fresh: dict[str, Any] = {}
    try:
        assert smbclient.listdir(server.unc(), **{**kw, "connection_cache": fresh}) == ["kept.txt"]
    finally:
        smbclient.reset_connection_cache(fail_on_error=False, connection_cache=fresh)


def test_two_servers_side_by_side(tmp_path: Path, accounts: Accounts, cache: dict[str, Any]) -> None:
    with SmbServer(tmp_path / "one") as one, SmbServer(tmp_path / "two") as two:
        assert one.port != two.port and one.path != two.path
        sids = {s.add_user(accounts.alice, _password(accounts, accounts.alice)) for s in (one, two)}
        assert len(sids) == 2  # each server has a machine SID of its own
        one.put("one.txt", b"1")
        two.put("two.txt", b"2")
        assert smbclient.listdir(one.unc(), **_as(one, accounts, accounts.alice, cache)) == ["one.txt"]
        assert smbclient.listdir(two.unc(), **_as(two, accounts, accounts.alice, cache)) == ["two.txt"]
        leftovers = [p for p in (one.path, two.path) if not str(p).startswith(str(tmp_path))]
    assert not any(os.path.exists(p) for p in leftovers)  # stop() removed the share folders it made in /tmp
