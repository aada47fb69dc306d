"""Privacy across user accounts: who may read what (index/access.py), and the enterprise-mode
daemon (`deskdex daemon --system`) serving real accounts, each seeing only what they may read.

The end-to-end test creates real accounts with useradd and runs the real CLI as each of them with
setpriv (tests/accounts.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
import zipfile
from pathlib import Path

import pytest

from deskdex.daemon import accounts
from deskdex.index.access import EVERYONE, Acl, AccessChecker, Principal, decode_acl, reader_terms

from .accounts import IS_ROOT, Users, clients_or_skip, run_as
from .daemon_fixture import DaemonProcess

needs_root = pytest.mark.skipif(not IS_ROOT, reason="needs root: chown to other uids, useradd, setpriv")


def test_acl_check_follows_the_kernel_rules():
    a, b, c = Principal(501, frozenset({501, 900})), Principal(502, frozenset({502})), Principal(503, frozenset({503}))
    # 0604, group 900: the owner reads, a member of group 900 is denied even though "other" may read.
    acl = Acl(owner=502, group=900, user_obj=6, group_obj=0, other=4)
    assert [acl.allows(p, 4) for p in (a, b, c)] == [False, True, True]
    # A named user entry is limited by the mask.
    masked = Acl(owner=502, group=502, user_obj=6, group_obj=0, other=0, mask=0, users=((503, 4),))
    assert not masked.allows(c, 4)
    assert Acl(502, 502, 6, 0, 0, 4, ((503, 4),)).allows(c, 4)
    # The kernel's xattr form: version 2, then (tag, perm, id) entries.
    raw = bytes.fromhex("02000000" "01000600ffffffff" "02000400f7010000" "04000000ffffffff"
                        "10000400ffffffff" "20000000ffffffff")
    decoded = decode_acl(raw, Acl(502, 502, 0, 0, 0))
    assert decoded.users == ((503, 4),) and decoded.mask == 4 and decoded.user_obj == 6
    assert reader_terms('{"uids":[502,501],"everyone":true}') == [501, 502, EVERYONE] and reader_terms(None) == []


@needs_root
def test_readers_with_modes_groups_acls_and_folders(open_dir: Path):
    if shutil.which("setfacl") is None:
        pytest.skip("setfacl is missing (package acl, see packaging/system-deps.sh)")
    A, B, C = 50001, 50002, 50003
    shared = 50100
    principals = [Principal(A, frozenset({A})), Principal(B, frozenset({B, shared})),
                  Principal(C, frozenset({C, shared}))]

    def make(path: Path, mode: int, uid: int, gid: int | None = None, folder: bool = False) -> Path:
        path.mkdir() if folder else path.write_text("x")
        os.chown(path, uid, uid if gid is None else gid)
        path.chmod(mode)
        return path

    home_a = make(open_dir / "a", 0o700, A, folder=True)
    home_b = make(open_dir / "b", 0o755, B, folder=True)
    home_c = make(open_dir / "c", 0o700, C, folder=True)
    files = {
        "a_world": make(home_a / "world.txt", 0o644, A),  # 0644, but the home is 0700
        "b_private": make(home_b / "private.txt", 0o600, B),
        "b_public": make(home_b / "public.txt", 0o644, B),
        "b_group": make(home_b / "group.txt", 0o640, B, shared),
        "b_acl": make(home_b / "acl.txt", 0o600, B),
        "b_denied": make(home_b / "denied.txt", 0o604, B, shared),  # group class without r: C denied
        "c_through_acl": make(home_c / "note.txt", 0o644, C),
    }
    subprocess.run(["setfacl", "-m", f"u:{A}:r", str(files["b_acl"])], check=True)
    subprocess.run(["setfacl", "-m", f"u:{A}:x", str(home_c)], check=True)  # A may pass through C's home

    checker = AccessChecker(principals)
    got = {k: checker.readers(str(p)) for k, p in files.items()}
    assert {k: (sorted(v.uids), v.everyone) for k, v in got.items()} == {
        "a_world": ([A], False),
        "b_private": ([B], False),
        "b_public": ([A, B, C], True),
        "b_group": ([B, C], False),
        "b_acl": ([A, B], False),
        "b_denied": ([A, B], False),  # "other" may read, but C may not: not "everyone"
        "c_through_acl": ([A, C], False),
    }
    assert got["b_acl"].owner == B


@needs_root
def test_regular_accounts_are_discovered(open_dir: Path):
    if shutil.which("useradd") is None:
        pytest.skip("useradd is missing")
    name = "dxt_" + uuid.uuid4().hex[:8]
    before = accounts.stamp()
    subprocess.run(["useradd", "-m", "-s", "/bin/sh", name], check=True, capture_output=True)
    try:
        assert accounts.stamp() != before
        found = {a.name: a for a in accounts.regular()}
        assert name in found and found[name].home == f"/home/{name}"
        assert found[name].gid in found[name].groups
        assert accounts.configured([name, "dxt_nobody_" + name])[0].uid == found[name].uid
    finally:
        subprocess.run(["userdel", "-r", name], capture_output=True)


@pytest.mark.slow
@needs_root
def test_system_daemon_serves_each_user_what_they_may_read(open_dir: Path):
    py, lib = clients_or_skip(open_dir)
    users = Users()
    daemon = None
    try:
        pa, pb = users.create()
        import grp
        import pwd

        ha, hb = Path(pa.pw_dir), Path(pb.pw_dir)
        ha.chmod(0o700)
        hb.chmod(0o755)

        def put(path: Path, text: str, mode: int, owner: pwd.struct_passwd, gid: int | None = None) -> Path:
            path.write_text(f"quokka {text}\n")
            os.chown(path, owner.pw_uid, owner.pw_gid if gid is None else gid)
            path.chmod(mode)
            return path

        put(ha / "a_secret.txt", "alpha", 0o600, pa)
        put(ha / "a_world.txt", "bravo", 0o644, pa)  # 0644 in a 0700 home: still A's alone
        put(hb / "b_secret.txt", "charlie", 0o600, pb)
        put(hb / "b_public.txt", "delta", 0o644, pb)  # 0644 in a 0755 home: everyone
        put(hb / "b_group.txt", "echo", 0o640, pb, grp.getgrnam(users.group).gr_gid)  # A is in the group
        put(hb / "b_acl.txt", "foxtrot", 0o600, pb)
        subprocess.run(["setfacl", "-m", f"u:{users.a}:r", str(hb / "b_acl.txt")], check=True)
        with zipfile.ZipFile(hb / "b_box.zip", "w") as z:  # members inherit their container's readers
            z.writestr("inner.txt", "quokka golf\n")
        os.chown(hb / "b_box.zip", pb.pw_uid, pb.pw_gid)
        (hb / "b_box.zip").chmod(0o600)

        home = open_dir / "home"
        # The third account does not exist yet: it is picked up when it is created (below).
        names = ", ".join(json.dumps(n) for n in (users.a, users.b, users.c))
        daemon = DaemonProcess(home, [], extra_config=f"accounts = [{names}]\n", args=("--system",))
        daemon.start()
        assert oct((home / "run").stat().st_mode & 0o777) == "0o755"
        assert oct(os.stat(daemon.socket).st_mode & 0o777) == "0o666"
        assert oct((home / "data").stat().st_mode & 0o777) == "0o700"

        def seen(user: str | None) -> set[str]:
            p = run_as(user, [py, "-m", "deskdex", "search", "quokka", "--json", "--limit", "50", "--home", str(home)],
                    lib, ha if user == users.a else hb if user == users.b else None)
            assert p.returncode == 0, p.stderr
            return {h["uri"].rsplit("/", 1)[-1] for h in json.loads(p.stdout)["hits"]}

        everything = {"a_secret.txt", "a_world.txt", "b_secret.txt", "b_public.txt", "b_group.txt", "b_acl.txt",
                      "b_box.zip#inner.txt"}
        assert {h["uri"].rsplit("/", 1)[-1] for h in daemon.call("search", query="quokka", limit=50)["hits"]} == everything
        assert seen(users.a) == {"a_secret.txt", "a_world.txt", "b_public.txt", "b_group.txt", "b_acl.txt"}
        assert seen(users.b) == {"b_secret.txt", "b_public.txt", "b_group.txt", "b_acl.txt",
                                 "b_box.zip#inner.txt"}
        assert seen(None) == {"b_public.txt"}

        # What a client says about itself counts for nothing: B claiming to be A (or root).
        spoof = ("import json,socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); f=s.makefile('rwb');"
                 "[(f.write(json.dumps(r).encode()+b'\\n'), f.flush(), print(f.readline().decode().strip())) for r in "
                 "json.loads(sys.argv[2])]")
        claims = [{"op": "search", "query": "quokka", "limit": 50, "reader": pa.pw_uid, "uid": 0},
                  {"op": "search", "query": "quokka", "limit": 50, "peer": [0, 0, 1]},
                  {"op": "pause"}, {"op": "retry"}, {"op": "status", "failures": True}]
        p = run_as(users.b, [py, "-c", spoof, daemon.socket, json.dumps(claims)], lib, hb)
        assert p.returncode == 0, p.stderr
        claimed, peer, pause, retry, status = (json.loads(line) for line in p.stdout.splitlines())
        assert claimed["ok"] is False and claimed["error"]["code"] == "bad_args"  # no such arguments
        assert peer["ok"] is False and peer["error"]["code"] == "bad_args"
        assert pause["ok"] is False and pause["error"]["code"] == "forbidden"
        assert retry["ok"] is False and retry["error"]["code"] == "forbidden"
        st = status["result"]
        # Counts of what B may read (its five files and the zip's member), none of the totals.
        assert st["documents"] == 6 and st["index_bytes"] is None and st["converted"] is None
        assert st["folders"] == [] and "failures" not in st and st["state"] == "idle"

        # Permission changes are followed live: a file's chmod (IN_ATTRIB), and a folder's.
        (hb / "b_secret.txt").chmod(0o644)
        ha.chmod(0o755)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            a_sees, b_sees = seen(users.a), seen(users.b)
            if "b_secret.txt" in a_sees and "a_world.txt" in b_sees:
                break
            time.sleep(0.3)
        assert "b_secret.txt" in a_sees and "a_world.txt" in b_sees, (a_sees, b_sees, daemon.log.read_text()[-2000:])
        assert "a_secret.txt" not in b_sees  # 0600 stays private in an open home

        # An account created while the daemon runs: its home is watched, its files are its own, and
        # what everyone may read (A's home is 0755 by now) is computed for it too.
        users.add(users.c)
        pc = pwd.getpwnam(users.c)
        Path(pc.pw_dir).chmod(0o700)
        put(Path(pc.pw_dir) / "c_own.txt", "hotel", 0o644, pc)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and (c_sees := seen(users.c)) != {"a_world.txt", "b_public.txt", "b_secret.txt", "c_own.txt"}:
            time.sleep(0.3)
        assert c_sees == {"a_world.txt", "b_public.txt", "b_secret.txt", "c_own.txt"}, daemon.log.read_text()[-2000:]
        assert "c_own.txt" not in seen(users.a)
    finally:
        if daemon is not None and daemon.proc is not None:
            daemon.stop()
        users.remove()
