"""The user accounts an enterprise-mode daemon (``deskdex daemon --system``) indexes and serves.

Either the names in the ``accounts`` setting, or, when it is empty, every regular account: a
uid between UID_MIN and UID_MAX of /etc/login.defs (1000 and 60000 by default), a home folder
that exists, and a login shell. Their home folders are the watched folders. ``stamp()`` changes
when /etc/passwd or /etc/group does (useradd, usermod -aG, userdel), so the daemon can pick up
accounts added later and group membership changes.
"""

from __future__ import annotations

import logging
import os
import pwd
from dataclasses import dataclass
import threading
from typing import Any, Callable, Iterable

from deskdex.converters import NOBODY, RunAs
from deskdex.index import AccessChecker, Principal
from deskdex.paths import folder_of
from deskdex.pipeline import FolderWatch, inotify

logger = logging.getLogger(__name__)

LOGIN_DEFS = "/etc/login.defs"
ACCOUNT_FILES = ("/etc/passwd", "/etc/group")
NO_LOGIN = ("nologin", "false", "sync", "shutdown", "halt")


@dataclass(frozen=True, slots=True)
class Account:
    name: str
    uid: int
    gid: int
    home: str
    groups: frozenset[int]

    @property
    def principal(self) -> Principal:
        return Principal(self.uid, self.groups)

    @property
    def run_as(self) -> RunAs:
        return RunAs(self.uid, self.gid, tuple(sorted(self.groups)))


def uid_range(path: str = LOGIN_DEFS) -> tuple[int, int]:
    """(UID_MIN, UID_MAX) of login.defs; Debian's defaults where it does not say."""
    lo, hi = 1000, 60000
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[1].isdigit():
                    if parts[0] == "UID_MIN":
                        lo = int(parts[1])
                    elif parts[0] == "UID_MAX":
                        hi = int(parts[1])
    except OSError:
        pass
    return lo, hi


def _account(pw: pwd.struct_passwd) -> Account:
    try:
        groups = frozenset(os.getgrouplist(pw.pw_name, pw.pw_gid))
    except OSError:  # the user vanished between the two look-ups
        groups = frozenset({pw.pw_gid})
    return Account(pw.pw_name, pw.pw_uid, pw.pw_gid, pw.pw_dir, groups)


def regular() -> list[Account]:
    """Every account a person logs into, by the rules in the module docstring."""
    lo, hi = uid_range()
    out = []
    for pw in pwd.getpwall():
        shell = os.path.basename(pw.pw_shell or "")
        if (lo <= pw.pw_uid <= hi and shell and shell not in NO_LOGIN
                and pw.pw_dir not in ("", "/") and os.path.isdir(pw.pw_dir)):
            out.append(_account(pw))
    return sorted(out, key=lambda a: a.uid)


def configured(names: Iterable[str]) -> list[Account]:
    """The named accounts; a name that does not exist (yet) is logged and left out."""
    out = []
    for name in names:
        try:
            out.append(_account(pwd.getpwnam(name)))
        except KeyError:
            logger.warning("account %r does not exist: not indexed until it does", name)
    return out


def load(names: Iterable[str]) -> list[Account]:
    names = list(names)
    return configured(names) if names else regular()


def stamp() -> tuple[int, ...]:
    """Changes whenever an account file is rewritten (they are replaced, not edited in place)."""
    out = []
    for path in ACCOUNT_FILES:
        try:
            st = os.stat(path)
            out += [st.st_ino, st.st_mtime_ns, st.st_size]
        except OSError:
            out += [0, 0, 0]
    return tuple(out)


def homes(accounts: Iterable[Account]) -> list[str]:
    return sorted({os.path.abspath(a.home) for a in accounts if os.path.isdir(a.home)})


class AccountWatcher:
    """Enterprise mode: the accounts whose homes are indexed, looked at again whenever /etc/passwd
    or /etc/group change (``on_change`` is called from the watch's thread; the daemon then calls
    ``reload`` from its own)."""

    def __init__(self, names: Iterable[str], on_change: Callable[[], None]) -> None:
        self.names = list(names)
        self.on_change = on_change
        self.accounts: list[Account] = []
        self._stamp: tuple[int, ...] = ()
        self._watch: FolderWatch | None = None
        self._observer: Any = None  # watchdog's, where there is no inotify
        self._timers: list[threading.Timer] = []
        self._read()

    def _read(self) -> None:
        self._stamp = stamp()
        self.accounts = load(self.names)
        named = ", ".join(f"{a.name} ({a.uid})" for a in self.accounts[:5]) or "none"
        more = len(self.accounts) - 5
        logger.info("accounts: %s%s", named, f" and {more} more" if more > 0 else "")

    def reload(self) -> bool:
        """Read the accounts again if the account files changed; True when they had."""
        if stamp() == self._stamp:
            return False
        self._read()
        for delay in (1.0, 5.0):  # useradd writes /etc/passwd first, then makes the home
            timer = threading.Timer(delay, self.on_change)
            timer.daemon = True
            timer.start()
            self._timers = [t for t in self._timers if t.is_alive()] + [timer]
        return True

    def homes(self) -> list[str]:
        return homes(self.accounts)

    def access_checker(self) -> Callable[[str, int | None], tuple[int, str] | None]:
        """Who may read a path, for this pass: folders' permissions are remembered only within one."""
        return AccessChecker(a.principal for a in self.accounts).owner_readers

    def reader_of(self) -> Callable[[str], RunAs]:
        """Whose rights read a path: the account whose home holds it (the innermost, when homes
        nest), else nobody's (a configured folder outside every home may hold anyone's files)."""
        # Looked up by each folder above the path, not by a look at every home: a server with
        # 10,000 accounts asks for every file it converts.
        by_home: dict[str, RunAs] = {}
        for a in self.accounts:  # the first account of a home shared by several, as before
            by_home.setdefault(os.path.abspath(a.home).rstrip(os.sep) or os.sep, a.run_as)

        def reader(path: str) -> RunAs:
            home = folder_of(os.path.dirname(path), by_home)  # below a home, not the home itself
            return NOBODY if home is None else by_home[home]

        return reader

    def start(self) -> None:
        folder = os.path.dirname(ACCOUNT_FILES[0])
        names = [os.path.basename(p) for p in ACCOUNT_FILES]
        if inotify.available():
            try:
                self._watch = FolderWatch(folder, names, self.on_change, name="deskdex-accounts").start()
            except OSError as exc:  # no inotify instance left: accounts are read again on each reconcile
                logger.warning("account changes in %s are not followed live: %s", folder, exc)
            return
        # Elsewhere (no inotify): watchdog's platform observer, through its public API.
        from watchdog.events import (FileClosedEvent, FileCreatedEvent, FileModifiedEvent, FileMovedEvent,
                                     FileSystemEvent, FileSystemEventHandler)
        from watchdog.observers import Observer

        on_change = self.on_change

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: FileSystemEvent) -> None:
                paths = (os.fsdecode(event.src_path), os.fsdecode(event.dest_path or ""))
                if any(os.path.basename(p) in names for p in paths):
                    on_change()

        self._observer = Observer()
        self._observer.schedule(Handler(), folder, recursive=False,
                                event_filter=[FileCreatedEvent, FileModifiedEvent, FileClosedEvent, FileMovedEvent])
        self._observer.start()

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.stop()
            self._watch = None
        if self._observer is not None:
            self._observer.stop()
            self._observer.join()
            self._observer = None
        for timer in self._timers:  # the second looks, not yet due: no thread outlives stop()
            timer.cancel()
            timer.join()
        self._timers = []
