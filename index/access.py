"""Who may read a file: the owner, group and mode bits, POSIX ACLs, and every parent folder.

"Who" is open-ended, so it is computed for a known set of principals (the accounts an
enterprise-mode daemon serves, each a uid with its groups) plus one more: *everyone*, a user
outside them, who gets the "other" permissions. A principal may read a file when the file
grants it read (r) and every folder from ``/`` down to the file grants it search (x), checked
the way the kernel does (acl(5), "Access check algorithm"). Root is not a principal: it reads
everything.

ACLs are read from the ``system.posix_acl_access`` extended attribute with ``os.getxattr`` and
decoded here (the kernel's xattr format, linux/posix_acl_xattr.h): pylibacl ships no wheels
(it needs libacl headers and a compiler) and ``getfacl`` would cost a process per file.

``Access.terms()`` is what the search index stores in its ``reader`` field: each uid that may
read, and ``EVERYONE`` (-1) when a user outside the accounts may. *everyone* is only set when
every known account may read the file too, so a filter on ``reader IN (uid, -1)`` is exact
for known accounts even where a group entry denies what "other" allows. Left open: a user
outside the accounts whose group is denied while "other" may read sees such a file in results.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
import struct
from dataclasses import dataclass
from typing import Iterable, NamedTuple

logger = logging.getLogger(__name__)

EVERYONE = -1
READ, SEARCH = 4, 1
_XATTR = "system.posix_acl_access"
_USER_OBJ, _USER, _GROUP_OBJ, _GROUP, _MASK, _OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
_NOBODY = -2  # uid of "a user outside the accounts": matches no owner, no entry


class Principal(NamedTuple):
    uid: int
    groups: frozenset[int]


@dataclass(frozen=True, slots=True)
class Acl:
    """The permission entries of one inode (from the mode bits when it has no ACL)."""

    owner: int
    group: int
    user_obj: int
    group_obj: int
    other: int
    mask: int = 7
    users: tuple[tuple[int, int], ...] = ()
    groups: tuple[tuple[int, int], ...] = ()

    def allows(self, who: Principal, want: int) -> bool:
        if who.uid == self.owner:
            return self.user_obj & want == want
        for uid, perm in self.users:
            if uid == who.uid:
                return perm & self.mask & want == want
        matched = False
        for gid, perm in ((self.group, self.group_obj), *self.groups):
            if gid in who.groups:
                matched = True
                if perm & self.mask & want == want:
                    return True
        if matched:  # a matching group entry without the permission denies; "other" is not asked
            return False
        return self.other & want == want


def read_acl(path: str | int, st: os.stat_result) -> Acl:
    """The entries of ``path`` or of an open descriptor (already stat'ed as ``st``): its ACL, or
    its mode bits."""
    mode = st.st_mode
    base = Acl(st.st_uid, st.st_gid, (mode >> 6) & 7, (mode >> 3) & 7, mode & 7)
    try:
        data = os.getxattr(path, _XATTR) if isinstance(path, int) else os.getxattr(path, _XATTR, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOENT):
            logger.debug("%s: cannot read its ACL: %s", path, exc)
        return base
    return decode_acl(data, base)


def decode_acl(data: bytes, base: Acl) -> Acl:
    """Decode the kernel's xattr form: a u32 version (2), then (u16 tag, u16 perm, u32 id) each."""
    if len(data) < 4 or struct.unpack_from("<I", data)[0] != 2 or (len(data) - 4) % 8:
        logger.warning("an ACL in an unknown format: ignored, the mode bits apply")
        return base
    user_obj, group_obj, other, mask = base.user_obj, base.group_obj, base.other, 7
    users, groups = [], []
    for tag, perm, ident in struct.iter_unpack("<HHI", data[4:]):
        if tag == _USER_OBJ:
            user_obj = perm
        elif tag == _USER:
            users.append((ident, perm))
        elif tag == _GROUP_OBJ:
            group_obj = perm
        elif tag == _GROUP:
            groups.append((ident, perm))
        elif tag == _MASK:
            mask = perm
        elif tag == _OTHER:
            other = perm
    return Acl(base.owner, base.group, user_obj, group_obj, other, mask, tuple(users), tuple(groups))


@dataclass(frozen=True, slots=True)
class Access:
    owner: int
    uids: frozenset[int]
    everyone: bool

    def terms(self) -> list[int]:
        return sorted(self.uids) + ([EVERYONE] if self.everyone else [])

    def to_json(self) -> str:
        return json.dumps({"uids": sorted(self.uids), "everyone": self.everyone}, separators=(",", ":"))

    @classmethod
    def from_json(cls, owner: int | None, text: str | None) -> "Access | None":
        if not text:
            return None
        d = json.loads(text)
        return cls(owner if owner is not None else -1, frozenset(d.get("uids", ())), bool(d.get("everyone")))


def reader_terms(readers: str | None) -> list[int]:
    """The index terms of a catalog row's ``readers`` column (none: nobody but root)."""
    acc = Access.from_json(None, readers)
    return acc.terms() if acc is not None else []


class AccessChecker:
    """Computes ``Access`` for files, remembering what each folder lets through. Make a new one
    for each pass: it does not notice permission changes made after a folder was looked at."""

    def __init__(self, principals: Iterable[Principal]) -> None:
        self.principals = tuple(principals)
        self._everyone = Principal(_NOBODY, frozenset())
        self._dirs: dict[str, tuple[frozenset[int], bool]] = {}

    def readers(self, path: str, fd: int | None = None) -> Access:
        """Who may read ``path``; given ``fd``, the file open there: its owner, mode and ACL are
        the descriptor's, so they are those of the file actually read, whatever the path names by
        now (its folders' are still looked up by path)."""
        path = os.path.abspath(path)
        st = os.fstat(fd) if fd is not None else os.stat(path, follow_symlinks=False)
        uids, everyone = self._through(os.path.dirname(path))
        acl = read_acl(fd if fd is not None else path, st)
        uids = frozenset(p.uid for p in self.principals if p.uid in uids and acl.allows(p, READ))
        everyone = everyone and acl.allows(self._everyone, READ)
        # "everyone" only when no known account is left out (see the module docstring).
        everyone = everyone and all(p.uid in uids for p in self.principals)
        return Access(st.st_uid, uids, everyone)

    def owner_readers(self, path: str, fd: int | None = None) -> tuple[int, str] | None:
        """(owner, readers JSON) for a catalog row; None when the file cannot be looked at."""
        try:
            acc = self.readers(path, fd)
        except OSError as exc:
            logger.debug("%s: no access information: %s", path, exc)
            return None
        return acc.owner, acc.to_json()

    def _through(self, folder: str) -> tuple[frozenset[int], bool]:
        """Who can reach entries of ``folder``: search permission on it and every folder above."""
        hit = self._dirs.get(folder)
        if hit is not None:
            return hit
        parent = os.path.dirname(folder)
        uids, everyone = self._through(parent) if parent != folder else (frozenset(p.uid for p in self.principals), True)
        try:
            st = os.stat(folder)
            if not stat.S_ISDIR(st.st_mode):
                raise NotADirectoryError(folder)
            acl = read_acl(folder, st)
            result = (frozenset(p.uid for p in self.principals if p.uid in uids and acl.allows(p, SEARCH)),
                      everyone and acl.allows(self._everyone, SEARCH))
        except OSError:
            result = (frozenset(), False)
        self._dirs[folder] = result
        return result
