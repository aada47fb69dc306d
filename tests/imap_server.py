"""A real IMAP server for the tests: Dovecot (Debian package dovecot-imapd) on 127.0.0.1, with a
configuration, a user and a Maildir of its own in a folder of the test's, started as a child process.

Nothing of /etc/dovecot is read, so servers run side by side (pytest-xdist) and beside a system
Dovecot. The tests change the mailbox through IMAP itself (imaplib), never the Maildir's files, so
that Dovecot's indexes and UIDs stay what a real server would say.

The hierarchy separator is "/" (set in the inbox namespace: "Work/Projects" is a folder inside
"Work"); on disk Maildir++ keeps it as the folder ``.Work.Projects``.

Written for Dovecot 2.3 (Debian 12); 2.4 changed the configuration's syntax, and ``start`` says so
rather than failing on a line of the file."""

from __future__ import annotations

import base64
import contextlib
import datetime
import email.message
import email.parser
import email.policy
import email.utils
import grp
import imaplib
import mimetypes
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any, Iterator

from .servers import HOST, end_session, free_port, launch_session

SEPARATOR = "/"
START_TIMEOUT = 20.0
STOP_TIMEOUT = 15.0
# Longest socket Dovecot makes in base_dir ("token-login/imap-urlauth", "replication-notify-fifo")
# plus its slash; a Unix socket's path has at most 107 bytes on Linux.
_SOCKET_NAME_ROOM = 26
_UNIX_PATH_MAX = 107
# Services Dovecot chroots by default; chroot() needs root, so a non-root server turns it off.
_CHROOTED = ("anvil", "imap-login", "imap-urlauth-login", "ipc", "old-stats", "aggregator", "director")


def dovecot_missing() -> str:
    """Why no Dovecot can start here ('' when it can): for a test's skip reason."""
    if shutil.which("dovecot") is None and not os.access("/usr/sbin/dovecot", os.X_OK):
        return "dovecot is not installed (Debian package dovecot-imapd; packaging/system-deps.sh installs it)"
    return ""


def _dovecot() -> str:
    return shutil.which("dovecot") or "/usr/sbin/dovecot"


def _mailbox(name: str) -> str:
    """A folder name as an IMAP quoted string in modified UTF-7 (RFC 3501 5.1.3): imaplib sends
    arguments as they are, and Dovecot 2.3 does not take UTF-8 names."""
    out: list[str] = []
    wide: list[str] = []

    def flush() -> None:
        if wide:
            raw = base64.b64encode("".join(wide).encode("utf-16-be")).decode("ascii")
            out.append("&" + raw.rstrip("=").replace("/", ",") + "-")
            wide.clear()

    for ch in name:
        if 0x20 <= ord(ch) <= 0x7E:
            flush()
            out.append("&-" if ch == "&" else ch)
        else:
            wide.append(ch)
    flush()
    quoted = "".join(out).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{quoted}"'


def _check(what: str, typ: str, data: list[Any]) -> list[Any]:
    if typ != "OK":
        raise RuntimeError(f"IMAP {what} answered {typ}: {data!r}")
    return data


class ImapServer:
    """One Dovecot serving ``user`` (password ``password``) on 127.0.0.1, its files under ``folder``.
    A context manager: ``with ImapServer(tmp_path) as server: ...``."""

    def __init__(self, folder: Path, user: str = "alice", password: str = "secret-pw") -> None:
        # passwd-file is colon-separated, one user a line
        for value in (user, password):
            if not value or any(c in value for c in ":\r\n"):
                raise ValueError(f"user and password must be non-empty, without ':' or line breaks: {value!r}")
        self.folder = Path(folder).resolve()
        self._user = user
        self._password = password
        self._port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._base_dir: Path | None = None
        self._own_base_dir = False  # a short folder in /tmp, removed by stop()
        self.conf = self.folder / "dovecot.conf"
        self.log = self.folder / "dovecot.log"
        self._stderr = self.folder / "dovecot.stderr"
        self.maildir = self.folder / "mail" / user

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
    def user(self) -> str:
        return self._user

    @property
    def password(self) -> str:
        return self._password

    @property
    def url(self) -> str:
        return f"imap://{self._user}@{HOST}:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # -- life cycle

    def start(self) -> None:
        """Writes the configuration, starts Dovecot and waits for its greeting. RuntimeError when it
        cannot run here (no binary, Dovecot 2.4+, no greeting within 20 s: with the log's end)."""
        if self.running:
            raise RuntimeError("the server is already running")
        if why := dovecot_missing():
            raise RuntimeError(why)
        version = subprocess.run([_dovecot(), "--version"], capture_output=True, text=True).stdout.strip()
        if not re.match(r"2\.3\.", version):
            raise RuntimeError(f"Dovecot {version or '(unknown version)'}: tests/imap_server.py writes a "
                               "Dovecot 2.3 configuration (2.4 changed its syntax)")
        if self._port is None:
            self._port = free_port()
        try:
            self._prepare()
            self._launch()
        except BaseException:
            self.stop()  # the short base_dir in /tmp, if one was made
            raise

    def stop(self) -> None:
        """Ends the Dovecot this object started, and its processes; again: nothing."""
        self._terminate()
        if self._own_base_dir and self._base_dir is not None:
            shutil.rmtree(self._base_dir, ignore_errors=True)
            self._base_dir, self._own_base_dir = None, False

    def pause(self) -> None:
        """The server goes away (connections refused, open sessions cut); its mail stays."""
        if not self.running:
            raise RuntimeError("the server is not running")
        self._terminate()

    def resume(self) -> None:
        """The server comes back on the same port with the same mail."""
        if self.running:
            raise RuntimeError("the server is already running")
        if self._port is None or self._base_dir is None:
            raise RuntimeError("the server was never started")
        self._launch()

    def __enter__(self) -> ImapServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- the mailbox, changed through IMAP

    @contextlib.contextmanager
    def session(self) -> Iterator[imaplib.IMAP4]:
        """An imaplib client logged in as the user, logged out (its socket closed) afterwards."""
        client = imaplib.IMAP4(HOST, self.port, timeout=10)
        try:
            client.login(self._user, self._password)
            yield client
        finally:
            try:
                client.logout()
            except (imaplib.IMAP4.error, OSError):
                client.shutdown()

    def append(self, folder: str, message: bytes) -> int:
        """Adds ``message`` to ``folder`` (created when missing) and returns its UID. imaplib sends its
        lines ending in CRLF (IMAP's form), so a message written with CRLF comes back byte for byte."""
        when = None
        date = email.parser.BytesHeaderParser().parsebytes(message).get("Date")
        if date:
            with contextlib.suppress(TypeError, ValueError):
                when = imaplib.Time2Internaldate(email.utils.parsedate_to_datetime(date))
        with self.session() as m:
            self._ensure_folder(m, folder)
            data = _check("APPEND", *m.append(_mailbox(folder), None, when, message))
            found = re.search(rb"\[APPENDUID \d+ (\d+)\]", data[0] or b"")
            if found:
                return int(found.group(1))
            # a server without UIDPLUS: the newest UID is the one just added
            _check("SELECT", *m.select(_mailbox(folder), readonly=True))
            return max(self._search(m))

    def delete(self, folder: str, uid: int) -> None:
        """Expunges the message ``uid`` of ``folder``, and only it (UID EXPUNGE, RFC 4315)."""
        with self.session() as m:
            _check("SELECT", *m.select(_mailbox(folder)))
            if uid not in self._search(m):
                raise LookupError(f"no message with UID {uid} in {folder!r}")
            _check("UID STORE", *m.uid("STORE", str(uid), "+FLAGS.SILENT", r"(\Deleted)"))
            _check("UID EXPUNGE", *m.uid("EXPUNGE", str(uid)))

    def create_folder(self, name: str) -> None:
        with self.session() as m:
            _check("CREATE", *m.create(_mailbox(name)))

    def delete_folder(self, name: str) -> None:
        """Removes a folder and its messages (Dovecot refuses while it has subfolders)."""
        with self.session() as m:
            _check("DELETE", *m.delete(_mailbox(name)))

    def uids(self, folder: str) -> list[int]:
        with self.session() as m:
            _check("EXAMINE", *m.select(_mailbox(folder), readonly=True))
            return self._search(m)

    def uidvalidity(self, folder: str) -> int:
        with self.session() as m:
            data = _check("STATUS", *m.status(_mailbox(folder), "(UIDVALIDITY)"))
        found = re.search(rb"UIDVALIDITY (\d+)", data[0] or b"")
        if not found:
            raise RuntimeError(f"no UIDVALIDITY in {data!r}")
        return int(found.group(1))

    @staticmethod
    def _search(m: imaplib.IMAP4) -> list[int]:
        data = _check("UID SEARCH", *m.uid("SEARCH", "ALL"))
        return sorted(int(u) for u in (data[0] or b"").split())

    @staticmethod
    def _ensure_folder(m: imaplib.IMAP4, folder: str) -> None:
        if folder.upper() == "INBOX":
            return
        typ, data = m.create(_mailbox(folder))
        if typ != "OK" and not any(b"[ALREADYEXISTS]" in d for d in data if isinstance(d, bytes)):
            raise RuntimeError(f"IMAP CREATE {folder!r} answered {typ}: {data!r}")

    # -- the server's files and process

    def _prepare(self) -> None:
        """The configuration, the passwd-file and the Maildir, for the user running the tests."""
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "state").mkdir(exist_ok=True)
        if self._base_dir is None:
            self._base_dir = self.folder / "run"
            if len(str(self._base_dir)) + _SOCKET_NAME_ROOM > _UNIX_PATH_MAX:
                # pytest's deep tmp_path would make Dovecot's sockets fail to bind
                self._base_dir = Path(tempfile.mkdtemp(prefix="dovecot-", dir="/tmp"))
                self._own_base_dir = True
            self._base_dir.mkdir(exist_ok=True)
        mail = self.folder / "mail"
        mail.mkdir(exist_ok=True)
        mail.chmod(0o755)  # with the mail chroot below it is the mail user's "/"
        self.maildir.mkdir(exist_ok=True)
        passwd = self.folder / "passwd"
        passwd.write_text(f"{self._user}:{{PLAIN}}{self._password}\n")
        passwd.chmod(0o600)

        me = pwd.getpwuid(os.geteuid())
        if me.pw_uid == 0:
            # imap-login refuses to run as root and imap refuses a mail uid of 0: the Debian package's
            # dovenull logs in and nobody owns the mail. The imap process chroots into folder/mail
            # ("/./" in the home) before it drops root, because pytest's tmp_path sits under a 0700
            # folder of root's that nobody cannot cross. The internal services (auth reads the
            # passwd-file) stay root, for the same reason.
            mail_user = pwd.getpwnam("nobody")
            uid, gid = mail_user.pw_uid, mail_user.pw_gid
            internal_user, internal_group, login_user = "root", "root", "dovenull"
            try:
                pwd.getpwnam(login_user)
            except KeyError:
                raise RuntimeError("no dovenull account (the dovecot-core package makes it)") from None
            home = f"{mail}/./%u"
            chroot = f"valid_chroot_dirs = {mail}\n"
        else:
            # One account for everything: Dovecot's "rootless" setup, without chroots
            uid, gid = me.pw_uid, me.pw_gid
            internal_user = login_user = me.pw_name
            internal_group = grp.getgrgid(gid).gr_name
            home = f"{mail}/%u"
            chroot = "".join(f"service {name} {{\n  chroot =\n}}\n" for name in _CHROOTED)
        for path in (mail / self._user, *(mail / self._user).rglob("*")):
            os.chown(path, uid, gid)

        self.conf.write_text(f"""\
# Written by tests/imap_server.py: a self-contained Dovecot 2.3 for one test, nothing from /etc/dovecot.
base_dir = {self._base_dir}
state_dir = {self.folder / "state"}
log_path = {self.log}
info_log_path = {self.log}
protocols = imap
listen = {HOST}
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
default_internal_user = {internal_user}
default_internal_group = {internal_group}
default_login_user = {login_user}
first_valid_uid = {uid}
last_valid_uid = {uid}
first_valid_gid = {gid}
last_valid_gid = {gid}
mail_location = maildir:~
# no cached credentials or penalties: a test may change the password or fail logins on purpose
auth_cache_size = 0
auth_failure_delay = 0
{chroot}namespace inbox {{
  inbox = yes
  separator = {SEPARATOR}
}}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {passwd}
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={home}
}}
service imap-login {{
  inet_listener imap {{
    address = {HOST}
    port = {self._port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
""")

    def _launch(self) -> None:
        self._proc = launch_session([_dovecot(), "-F", "-c", str(self.conf)], self._stderr, self._greets,
                                    f"greet on {HOST}:{self._port}", START_TIMEOUT, self._log_tail)

    def _greets(self) -> bool:
        try:
            with socket.create_connection((HOST, self.port), timeout=2) as s:
                s.settimeout(2)
                line = b""
                while not line.endswith(b"\n") and len(line) < 4096:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    line += chunk
                # greeted: say goodbye, so Dovecot logs no "disconnected before greeting" noise
                if line.startswith(b"* OK"):
                    with contextlib.suppress(OSError):
                        s.sendall(b"a LOGOUT\r\n")
                    return True
                return False
        except OSError:
            return False

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        end_session(proc, STOP_TIMEOUT)

    def _log_tail(self, lines: int = 30) -> str:
        text = ""
        for path in (self._stderr, self.log):
            with contextlib.suppress(OSError):
                text += path.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:]) or "(empty)"


def sample_message(subject: str, body: str, attachment: tuple[str, bytes] | None = None,
                   sender: str = "bob@example.org") -> bytes:
    """A real RFC 822 message (CRLF line ends, as IMAP carries it): text/plain, or multipart/mixed
    with ``attachment`` (file name, content) after the text."""
    msg = email.message.EmailMessage()
    msg["From"] = sender
    msg["To"] = "alice@example.org"
    msg["Subject"] = subject
    msg["Date"] = email.utils.format_datetime(datetime.datetime.now(datetime.timezone.utc))
    msg["Message-ID"] = email.utils.make_msgid(domain="example.org")
    msg.set_content(body)
    if attachment is not None:
        name, content = attachment
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        maintype, subtype = kind.split("/", 1)
        msg.add_attachment(content, maintype=maintype, subtype=subtype, filename=name)
    return msg.as_bytes(policy=email.policy.SMTP)
