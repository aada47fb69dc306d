"""Who may read a file of a network share, from its security descriptor: the DACL's ACEs evaluated for
FILE_READ_DATA (``readers``, a pure function), their Windows SIDs turned into local accounts (``SidMap``).

A SID stands for local accounts through, in this order: the setting ``sid_map`` (a SID -> an account's
name); Samba's Unix SIDs (``S-1-22-1-<uid>`` a uid, ``S-1-22-2-<gid>`` every account whose primary group
that is or who is a member of it); winbind's ``wbinfo --sid-to-uid`` (then ``--sid-to-gid``) where the
program is installed. Any other SID is nobody here. Everyone (``S-1-1-0``) and Authenticated Users
(``S-1-5-11``) allowed to read make a file everyone's.

The evaluation leans to fewer readers, never more: ACEs are taken in DACL order as Windows does (the
first ACE that decides an account's read access wins), inherit-only ACEs do not apply to the file, and
Everyone's allow counts only when no deny ACE of reading comes before it (a denied account would read
through "everyone": the index cannot say "everyone but bob"), and a deny of a SID that is nobody known
here (a domain group not in ``sid_map``) is taken as a deny of everyone not granted before it: who is in
it cannot be told. A NULL DACL (none at all) lets everyone in; an empty one nobody.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

logger = logging.getLogger(__name__)

EVERYONE = "S-1-1-0"
AUTHENTICATED_USERS = "S-1-5-11"
WORLD = frozenset({EVERYONE, AUTHENTICATED_USERS})
UNIX_USER = "S-1-22-1-"  # Samba: a Unix uid with no account of the server's passdb
UNIX_GROUP = "S-1-22-2-"  # Samba: a Unix gid

FILE_READ_DATA = 0x1
GENERIC_READ = 0x80000000
GENERIC_ALL = 0x10000000
READS = FILE_READ_DATA | GENERIC_READ | GENERIC_ALL  # the bits of a mask that let the content be read
INHERIT_ONLY_ACE = 0x08  # an ACE for what is made in a folder, not for the folder itself

WBINFO_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class Ace:
    """One ACE of a DACL: allowed or denied, to whom, which rights (its access mask), its flags."""

    allow: bool
    sid: str
    mask: int
    flags: int = 0


def readers(aces: Iterable[Ace] | None, uids_of: Callable[[str], frozenset[int]]) -> tuple[frozenset[int], bool]:
    """(the local uids that may read, whether everyone may) under the DACL ``aces`` (None: a NULL DACL),
    a SID's accounts given by ``uids_of``."""
    if aces is None:
        return frozenset(), True
    granted: set[int] = set()
    denied: set[int] = set()
    everyone = False
    any_denied = False  # a deny of reading seen: Everyone's allow after it no longer makes it everyone's
    world_denied = False  # Everyone denied: nobody not granted before is granted after
    for ace in aces:
        if ace.flags & INHERIT_ONLY_ACE or not ace.mask & READS:
            continue
        world = ace.sid in WORLD
        if ace.allow:
            if world:
                everyone = everyone or not any_denied
            elif not world_denied:
                granted.update(uid for uid in uids_of(ace.sid) if uid not in denied)
        else:
            any_denied = True
            who = frozenset() if world else uids_of(ace.sid)
            if not who:
                world_denied = True  # Everyone, or a SID that is nobody known here: it may be anyone
            denied.update(uid for uid in who if uid not in granted)
    return frozenset(granted), everyone


class SidMap:
    """The local accounts (uids) a SID stands for, remembered for the life of the object (one sync):
    ``sid_map`` first, then Samba's Unix SIDs, then winbind (``wbinfo``, when ``winbind`` is True and it
    is installed). Callable: ``SidMap(...)(sid)``."""

    def __init__(self, sid_map: Mapping[str, str] | None = None, winbind: bool = True) -> None:
        self.sid_map = dict(sid_map or {})
        self.wbinfo = shutil.which("wbinfo") if winbind else None
        self._known: dict[str, frozenset[int]] = {}
        self._unknown_names: set[str] = set()

    def __call__(self, sid: str) -> frozenset[int]:
        hit = self._known.get(sid)
        if hit is None:
            hit = self._known[sid] = self._resolve(sid)
        return hit

    def _resolve(self, sid: str) -> frozenset[int]:
        import pwd  # here: Unix only, and so is enterprise mode; the module loads anywhere

        name = self.sid_map.get(sid)
        if name is not None:
            try:
                return frozenset({pwd.getpwnam(name).pw_uid})
            except KeyError:
                if name not in self._unknown_names:
                    self._unknown_names.add(name)
                    logger.warning("sid_map: %s stands for %s, which is no account here: the map's entry is "
                                   "skipped", sid, name)
        for prefix, resolve in ((UNIX_USER, _uid), (UNIX_GROUP, group_members)):
            if sid.startswith(prefix):
                number = sid[len(prefix):]
                return resolve(int(number)) if number.isdigit() else frozenset()
        if sid in WORLD:
            return frozenset()  # every account: readers() takes it as "everyone"
        return self._winbind(sid)

    def _winbind(self, sid: str) -> frozenset[int]:
        if self.wbinfo is None:
            return frozenset()
        uid = self._ask("--sid-to-uid", sid)
        if uid is not None:
            return frozenset({uid})
        gid = self._ask("--sid-to-gid", sid)
        return group_members(gid) if gid is not None else frozenset()

    def _ask(self, option: str, sid: str) -> int | None:
        assert self.wbinfo is not None
        try:
            done = subprocess.run([self.wbinfo, option, sid], capture_output=True, text=True, timeout=WBINFO_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as exc:
            logger.debug("wbinfo %s %s: %s", option, sid, exc)
            return None
        out = done.stdout.strip()
        return int(out) if done.returncode == 0 and out.isdigit() else None


def _uid(uid: int) -> frozenset[int]:
    return frozenset({uid})


def group_members(gid: int) -> frozenset[int]:
    """The uids of the accounts whose primary group is ``gid`` or who are members of it."""
    import grp
    import pwd

    uids = {p.pw_uid for p in pwd.getpwall() if p.pw_gid == gid}
    try:
        members = grp.getgrgid(gid).gr_mem
    except KeyError:
        members = []
    for name in members:
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            continue
    return frozenset(uids)
