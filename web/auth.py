"""Who is asking the web UI: the owner holding the desktop daemon's token, or an account of the
system daemon logged in with its password (PAM).

Sessions live in the daemon's memory only: a restart logs everyone out, which is what a user
expects of a server that lost its state, and no session file can leak. Each session carries its
own CSRF token; a login is refused for a while after repeated failures, counted both for the
account (a guessed password spread over many addresses) and for the address (many accounts tried
from one place).
"""

from __future__ import annotations

import hmac
import logging
import os
import pwd
import secrets
import threading
import time
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

MAX_SESSIONS = 10_000  # past this the least recently used is ended: a flood of logins cannot fill memory
FAILURES_ALLOWED = 5  # failed logins within FAILURE_WINDOW before the account, or address, must wait
FAILURE_WINDOW = 15 * 60.0
LOCK_FIRST, LOCK_LONGEST = 30.0, 15 * 60.0  # the first wait, doubling at each further failure


@dataclass(frozen=True, slots=True)
class Account:
    """The account a request acts for: its uid and groups are what the socket's peer would carry."""

    uid: int
    gid: int
    name: str
    groups: tuple[int, ...] = ()

    @classmethod
    def of_uid(cls, uid: int) -> Account:
        try:
            pw = pwd.getpwuid(uid)
        except KeyError:
            return cls(uid, os.getgid() if uid == os.getuid() else uid, str(uid))
        return cls(uid, pw.pw_gid, pw.pw_name, tuple(os.getgrouplist(pw.pw_name, pw.pw_gid)))


@dataclass(slots=True)
class Session:
    sid: str
    account: Account
    csrf: str
    expires: float  # time.monotonic() after which the session is over unless used again
    created: float = field(default_factory=time.time)


class Sessions:
    """The logged-in sessions, by their cookie's random id; each use moves its expiry on."""

    def __init__(self, lifetime: float) -> None:
        self.lifetime = lifetime
        self._by_id: dict[str, Session] = {}
        self._lock = threading.Lock()

    def create(self, account: Account) -> Session:
        s = Session(secrets.token_urlsafe(32), account, secrets.token_urlsafe(24), time.monotonic() + self.lifetime)
        with self._lock:
            self._by_id[s.sid] = s
            while len(self._by_id) > MAX_SESSIONS:
                del self._by_id[next(iter(self._by_id))]  # insertion order: the least recently used
        return s

    def get(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        now = time.monotonic()
        with self._lock:
            s = self._by_id.get(sid)
            if s is None:
                return None
            if now > s.expires:
                del self._by_id[sid]
                return None
            s.expires = now + self.lifetime
            self._by_id[sid] = self._by_id.pop(sid)  # most recently used last
            return s

    def end(self, sid: str | None) -> None:
        with self._lock:
            self._by_id.pop(sid or "", None)

    def __len__(self) -> int:
        return len(self._by_id)


class LoginLimiter:
    """Failed logins per account and per address; ``wait`` says how long either must wait first."""

    def __init__(self) -> None:
        self._failures: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def wait(self, user: str, address: str) -> float:
        now = time.monotonic()
        with self._lock:
            return max(self._wait_of(f"user:{user}", now), self._wait_of(f"addr:{address}", now))

    def _wait_of(self, key: str, now: float) -> float:
        times = [t for t in self._failures.get(key, ()) if now - t < FAILURE_WINDOW]
        if times:
            self._failures[key] = times
        else:
            self._failures.pop(key, None)
        if len(times) < FAILURES_ALLOWED:
            return 0.0
        lock: float = min(LOCK_FIRST * 2.0 ** (len(times) - FAILURES_ALLOWED), LOCK_LONGEST)
        return max(0.0, times[-1] + lock - now)

    def failed(self, user: str, address: str) -> None:
        now = time.monotonic()
        with self._lock:
            for key in (f"user:{user}", f"addr:{address}"):
                self._failures.setdefault(key, []).append(now)
            if len(self._failures) > 100_000:  # an address spraying names: forget the oldest keys
                for key in list(self._failures)[:50_000]:
                    del self._failures[key]

    def succeeded(self, user: str) -> None:
        with self._lock:
            self._failures.pop(f"user:{user}", None)


def same_secret(given: str | None, expected: str) -> bool:
    """A token or CSRF value compared in constant time."""
    return bool(given) and hmac.compare_digest(str(given).encode(), expected.encode())


def check_password(service: str, user: str, password: str) -> Account | None:
    """The account ``user`` when PAM accepts ``password`` for it (authentication and account
    checks: an expired or locked account is refused too), else None. Blocks for PAM's failure
    delay: run it on a worker thread."""
    import pam

    if not user or len(user) > 256 or len(password) > 4096 or "\0" in user + password:
        return None
    try:
        account = Account.of_uid(pwd.getpwnam(user).pw_uid)
    except KeyError:
        account = None
    checker = pam.PamAuthenticator()
    try:
        ok = checker.authenticate(user, password, service=service)
    except Exception as exc:  # a broken PAM stack is the server's problem, not a wrong password
        logger.error("PAM service %s failed for %s: %s", service, user, exc)
        return None
    if not ok:
        logger.info("web login refused for %r: %s", user, checker.reason)
        return None
    return account
