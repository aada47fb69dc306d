"""A real SMB server for the tests: Samba's smbd (Debian package samba) on 127.0.0.1, with a
configuration, a passdb and a share of its own in a folder of the test's, started as a child process.

Nothing of /etc/samba or /var/lib/samba is read or written: every directory Samba keeps state in
(private, lock, state, cache, pid, ncalrpc, the winbindd socket's) is the server's own, and the port is
a free one, so servers run side by side (pytest-xdist) and beside a system Samba. No nmbd, winbindd or
samba-dcerpcd runs: NetBIOS is off, and ``rpc start on demand helpers = no`` keeps smbd from spawning
samba-dcerpcd, which would outlive it in a session of its own and log to /var/log/samba. So named pipes
(IPC$: srvsvc share enumeration, LSA name lookups) answer nothing; the tests name the share.

Root only: smbd switches to each logged-in account's uid to touch its files, which is what the
permission tests are about (a non-root smbd would need Samba's uid_wrapper test harness), so
``samba_missing()`` gives a skip reason when not root. The accounts are real Unix accounts
(``unix_account()`` makes throwaway ones with useradd), each added to this server's own passdb with
``SmbServer.add_user``, which is what Samba checks the password against (NTLMv2).

Permissions are the files' own on disk: no vfs module, so Samba maps the owner, group, mode bits and
POSIX ACL entries (setfacl) to an NT security descriptor that a client reads with SMB2 QUERY_INFO
(SecurityInformation OWNER|GROUP|DACL), and enforces them as the account. The SIDs it reports, in this
standalone setup without winbind (observed with Samba 4.17):

- an account in the server's passdb (every account added with ``add_user``):
  ``S-1-5-21-<server's machine SID>-<RID>``, RID 1000, 1001, ... in the order they were added. The
  machine SID is made up by each new server (its secrets.tdb), so it differs between servers;
  ``SmbServer.sid(name)`` gives an account's SID.
- a uid not in the passdb (root, for files the test made on disk): ``S-1-22-1-<uid>``;
  a gid (this passdb maps no group): ``S-1-22-2-<gid>``.
- everyone else (the mode's "other" bits): ``S-1-1-0`` (Everyone).

Mode bits that grant nothing still appear as an allow ACE with access mask 0 (``chmod 600`` gives the
owner 0x12019f, the group and Everyone 0x0), so a reader must look at the mask, e.g. for FILE_READ_DATA
(0x1); a setfacl ``u:name:r`` entry becomes an allow ACE of 0x120089 (FILE_GENERIC_READ) for that
account's SID. The RID is not the uid: only the server knows which account a S-1-5-21 SID is (its LSA,
which does not run here), so the tests take the SIDs from ``add_user``/``sid``.

An account that may not read a file (another account's ``chmod 600`` one) still lists and stats it, but
opening it, and reading its descriptor (READ_CONTROL), is refused with STATUS_ACCESS_DENIED. An account
in the share's ``admin users`` (``admin_users``, ``add_user(..., admin=True)``) acts as root on the
share and reads every file and descriptor, as a crawler's service account would, while the descriptors
still say which accounts may read.

Written for Samba 4.17 (Debian 12)."""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import urllib.parse
import uuid
from pathlib import Path
from types import TracebackType
from typing import Iterator

from .servers import HOST, end_session, free_port, launch_session

SHARE = "docs"
START_TIMEOUT = 20.0
STOP_TIMEOUT = 15.0
# smbd's messaging sockets live in lock_dir/msg.sock/<pid>; a Unix socket's path has at most 107 bytes
_SOCKET_NAME_ROOM = 24
_UNIX_PATH_MAX = 107
_USERADD_NAME_IN_USE = 9  # useradd(8): "username or group name already in use"
_SBIN = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")


def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    return next((f"{d}/{name}" for d in _SBIN if os.access(f"{d}/{name}", os.X_OK)), None)


def samba_missing() -> str:
    """Why no smbd can start here ('' when it can): for a test's skip reason."""
    if _tool("smbd") is None or _tool("pdbedit") is None:
        return "Samba is not installed (Debian package samba; packaging/system-deps.sh installs it)"
    if os.geteuid() != 0:
        return ("smbd must run as root: it switches to each logged-in account's uid, and the tests make "
                "real accounts with useradd")
    if _tool("useradd") is None or _tool("userdel") is None:
        return "useradd/userdel are missing (Debian package passwd)"
    return ""


def _crossable(path: Path) -> bool:
    """Whether any account may reach ``path``: every folder above it searchable by "other" (pytest's
    tmp_path sits in root's 0700 /tmp/pytest-of-root, which an account's smbd cannot cross)."""
    for parent in path.parents:
        try:
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
        except FileNotFoundError:
            continue
    return True


@contextlib.contextmanager
def unix_account(label: str = "") -> Iterator[pwd.struct_passwd]:
    """A throwaway Unix account (and its group of the same name), made with ``useradd
    --no-create-home`` and removed with ``userdel`` at the end; its passwd entry. The name is "dxs", a
    few random hex digits and ``label`` (at most 20 characters, Samba's limit for account names), so
    tests running in parallel never share an account. Root only: RuntimeError otherwise."""
    if os.geteuid() != 0:
        raise RuntimeError("unix_account() needs root (useradd)")
    clean = re.sub(r"[^a-z0-9_]", "", label.lower())
    for _ in range(20):
        name = f"dxs{uuid.uuid4().hex[:6]}{clean}"[:20]
        made = subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                              capture_output=True, text=True)
        if made.returncode != _USERADD_NAME_IN_USE:
            break  # another test's name (exit 9) is never removed below: draw again
    else:
        raise RuntimeError("useradd: no free account name after 20 tries")
    try:
        if made.returncode != 0:
            raise RuntimeError(f"useradd {name} failed ({made.returncode}): {made.stderr.strip()}")
        yield pwd.getpwnam(name)
    finally:
        # also after a failed useradd, which may leave a half-made account; -f: a connection of the
        # account's may still be open in a server not yet stopped
        subprocess.run(["userdel", "-f", name], capture_output=True, text=True)


class SmbServer:
    """One smbd serving the share ``docs`` on 127.0.0.1, its configuration and state under ``folder``.
    A context manager: ``with SmbServer(tmp_path / "smb") as server: ...``.

    The share's folder is ``path``: under ``folder`` when every account can reach it there, else (the
    usual case: pytest's tmp_path is under a 0700 folder of root's) in a folder of its own in /tmp,
    removed by ``stop()``. The test makes files there as root, and sets their owner, mode and ACLs; the
    share and its root are writable for every account."""

    def __init__(self, folder: Path, admin_users: tuple[str, ...] = ()) -> None:
        self.folder = Path(folder).resolve()
        self._admins = list(admin_users)
        self._port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._aux: Path | None = None  # a folder in /tmp of this server's, removed by stop()
        self._run: Path | None = None  # lock, pid and socket directories
        self._path: Path | None = None
        self._stopped = False
        self.conf = self.folder / "smb.conf"
        self.log = self.folder / "smbd.log"

    # -- what a client needs

    @property
    def host(self) -> str:
        return HOST

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the server has not been started")
        return self._port

    @property
    def share(self) -> str:
        return SHARE

    @property
    def path(self) -> Path:
        """The share's folder on disk."""
        if self._path is None:
            raise RuntimeError("the server has not been started")
        return self._path

    def url(self, path: str = "") -> str:
        """``smb://127.0.0.1:PORT/docs/<path>`` (``path`` with "/" separators, percent-encoded)."""
        return f"smb://{HOST}:{self.port}/{SHARE}/" + urllib.parse.quote(path.lstrip("/"), safe="/")

    def unc(self, path: str = "") -> str:
        r"""``\\127.0.0.1\docs\<path>``: the form smbclient (smbprotocol) takes, with ``port=`` aside."""
        rest = path.strip("/").replace("/", "\\")
        return rf"\\{HOST}\{SHARE}" + (rf"\{rest}" if rest else "")

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # -- accounts

    def add_user(self, name: str, password: str, admin: bool = False) -> str:
        """Adds the existing Unix account ``name`` to this server's passdb with ``password``, and returns
        its SID. ``admin``: the account is also one of the share's ``admin users`` (root on the share:
        it reads every file and security descriptor), from its next connection on."""
        if not password or any(c in password for c in "\r\n"):
            raise ValueError("the password must be non-empty, without line breaks")
        pwd.getpwnam(name)  # KeyError: no such Unix account, which Samba needs
        self._ensure_config()
        done = subprocess.run([self._pdbedit(), "-s", str(self.conf), "-a", "-t", "-u", name],
                              input=f"{password}\n{password}\n", capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"pdbedit -a {name} failed: {done.stdout}{done.stderr}")
        if admin and name not in self._admins:
            self._admins.append(name)
            self._write_config()
            if self.running:
                assert self._proc is not None
                self._proc.send_signal(signal.SIGHUP)  # reloads smb.conf for the connections to come
        return self.sid(name)

    def sid(self, name: str) -> str:
        """The SID Samba gives the passdb account ``name`` (S-1-5-21-<machine>-<RID>)."""
        done = subprocess.run([self._pdbedit(), "-s", str(self.conf), "-v", "-u", name],
                              capture_output=True, text=True)
        found = re.search(r"^User SID:\s*(S-[0-9-]+)\s*$", done.stdout, re.M)
        if done.returncode != 0 or not found:
            raise KeyError(f"{name} is not in this server's passdb: {done.stdout}{done.stderr}")
        return found.group(1)

    def put(self, relpath: str, data: bytes, owner: str | None = None, mode: int = 0o644,
            mtime: float | None = None) -> Path:
        """Writes a file into the share on disk, owned by ``owner`` (an account's name, with its own
        group; else root) with ``mode``; its path. Missing folders are made root's with mode 0777, as
        the share's root: any account may add files there."""
        target = self.path / relpath
        for parent in reversed(target.relative_to(self.path).parents):
            folder = self.path / parent
            if not folder.exists():
                folder.mkdir()
                folder.chmod(0o777)
        target.write_bytes(data)
        if owner is not None:
            entry = pwd.getpwnam(owner)
            os.chown(target, entry.pw_uid, entry.pw_gid)
        target.chmod(mode)
        if mtime is not None:
            os.utime(target, (mtime, mtime))
        return target

    # -- life cycle

    def start(self) -> None:
        """Writes the configuration, starts smbd and waits until it accepts connections. RuntimeError
        when it cannot run here (no Samba, not root, not listening within 20 s: with the log's end)."""
        if self.running:
            raise RuntimeError("the server is already running")
        if self._stopped:
            raise RuntimeError("the server was stopped for good (pause() and resume() come back)")
        if why := samba_missing():
            raise RuntimeError(why)
        try:
            self._ensure_config()
            self._launch()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Ends the smbd this object started, and its processes, for good; removes its folder in /tmp
        (with the share, when it is there), if any. Again: nothing."""
        self._stopped = True
        self._terminate()
        if self._aux is not None:
            shutil.rmtree(self._aux, ignore_errors=True)
            self._aux = None

    def pause(self) -> None:
        """The server goes away (connections refused, open sessions cut); its files and accounts stay."""
        if not self.running:
            raise RuntimeError("the server is not running")
        self._terminate()

    def resume(self) -> None:
        """The server comes back on the same port with the same files and accounts."""
        if self.running:
            raise RuntimeError("the server is already running")
        if self._port is None or self._path is None or self._stopped:
            raise RuntimeError("the server was never started, or was stopped for good")
        self._launch()

    def __enter__(self) -> SmbServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- the server's files and process

    @staticmethod
    def _pdbedit() -> str:
        return _tool("pdbedit") or "/usr/bin/pdbedit"

    def _ensure_config(self) -> None:
        """The folders and the configuration, once (add_user before start needs them too)."""
        if self._port is not None:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        share = self.folder / SHARE
        run = self.folder / "run"
        if not _crossable(share) or len(str(run / "lock" / "msg.sock")) + _SOCKET_NAME_ROOM > _UNIX_PATH_MAX:
            self._aux = Path(tempfile.mkdtemp(prefix="deskdex-smb-", dir="/tmp"))
            self._aux.chmod(0o755)
            if not _crossable(share):
                share = self._aux / SHARE
            if len(str(run / "lock" / "msg.sock")) + _SOCKET_NAME_ROOM > _UNIX_PATH_MAX:
                run = self._aux / "run"
        self._path, self._run = share, run
        share.mkdir(exist_ok=True)
        share.chmod(0o777)  # any account may add files to the share's root
        for name in ("private", "state", "cache", "usershares"):
            (self.folder / name).mkdir(exist_ok=True)
        (self.folder / "private").chmod(0o700)
        for name in ("lock", "pid", "ncalrpc", "winbindd"):
            (run / name).mkdir(parents=True, exist_ok=True)
        self._port = free_port()
        self._write_config()

    def _write_config(self) -> None:
        assert self._run is not None and self._path is not None
        f, run = self.folder, self._run
        admins = f"  admin users = {' '.join(self._admins)}\n" if self._admins else ""
        self.conf.write_text(f"""\
# Written by tests/smb_server.py: a self-contained smbd (Samba 4.17) for one test, nothing from /etc/samba.
[global]
  server role = standalone server
  workgroup = DESKDEX
  netbios name = DESKDEXTEST
  server string = deskdex test server
  smb ports = {self._port}
  interfaces = {HOST}
  bind interfaces only = yes
  disable netbios = yes
  multicast dns register = no
  server min protocol = SMB2_10
  host msdfs = no
  passdb backend = tdbsam:{f / "private" / "passdb.tdb"}
  map to guest = never
  private dir = {f / "private"}
  state directory = {f / "state"}
  cache directory = {f / "cache"}
  lock directory = {run / "lock"}
  pid directory = {run / "pid"}
  ncalrpc dir = {run / "ncalrpc"}
  winbindd socket directory = {run / "winbindd"}
  binddns dir = {f / "private" / "bind-dns"}
  usershare path = {f / "usershares"}
  usershare max shares = 0
  log file = {self.log}
  max log size = 0
  log level = 1
  rpc start on demand helpers = no
  load printers = no
  printing = bsd
  printcap name = /dev/null
  disable spoolss = yes

[{SHARE}]
  path = {self._path}
  read only = no
  browseable = yes
{admins}""")

    def _launch(self) -> None:
        smbd = _tool("smbd") or "/usr/sbin/smbd"
        self._proc = launch_session([smbd, "--foreground", "--no-process-group", "--debug-stdout", "-s", str(self.conf)],
                                    self.log, self._listening, f"listen on {HOST}:{self._port}", START_TIMEOUT,
                                    self._log_tail, cwd="/")

    def _listening(self) -> bool:
        try:
            with socket.create_connection((HOST, self.port), timeout=2):
                return True
        except OSError:
            return False

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        end_session(proc, STOP_TIMEOUT)

    def _log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) or "(empty)"
        return "(no log)"
