"""Pseudo file systems (/proc, /sys, /dev, cgroups...) are never walked or watched below a watched
folder: they hold no documents, /proc alone lists every process's files and memory maps, and a
walk of /sys does not end in reasonable time. A folder named as watched is walked even there.

Told by the file system's type, not by its path: the mount points and types of
/proc/self/mountinfo (Linux), read once and again only after a mount or unmount (the kernel marks
the open file with POLLPRI then), so a scan asks a set, not the disk. Elsewhere nothing is pseudo.
"""

from __future__ import annotations

import logging
import os
import re
import select
import threading

logger = logging.getLogger(__name__)

# Kernel interfaces and device nodes, not files of anyone's. tmpfs, ramfs, overlay, FUSE and disk
# file systems hold real files and are walked.
PSEUDO_TYPES = frozenset({
    "proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "securityfs", "debugfs", "tracefs",
    "pstore", "bpf", "configfs", "fusectl", "mqueue", "hugetlbfs", "autofs", "binfmt_misc", "efivarfs",
    "selinuxfs", "smackfs", "apparmorfs", "rpc_pipefs", "nfsd", "nsfs", "sockfs", "pipefs", "usbfs",
})

MOUNTINFO = "/proc/self/mountinfo"
_ESCAPE = re.compile(rb"\\([0-7]{3})")  # mountinfo writes space, tab, newline and \ as \ooo


class MountTable:
    """The pseudo file systems' mount points, as paths (str, as os.fsdecode gives them)."""

    def __init__(self, path: str = MOUNTINFO) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._poll: select.poll | None = None
        self._pseudo: dict[str, str] = {}

    def pseudo(self) -> dict[str, str]:
        """Mount point -> type of every pseudo file system mounted now."""
        with self._lock:
            try:
                if self._fd is None:
                    self._fd = os.open(self._path, os.O_RDONLY | os.O_CLOEXEC)
                    self._poll = select.poll()
                    self._poll.register(self._fd, select.POLLPRI)
                    self._pseudo = self._read()
                elif self._poll is not None and self._poll.poll(0):  # mounted or unmounted since
                    self._pseudo = self._read()
            except OSError as exc:  # not Linux, or no /proc: nothing is told apart
                logger.debug("cannot read %s: %s", self._path, exc)
                self._pseudo = {}
            return self._pseudo

    def _read(self) -> dict[str, str]:
        assert self._fd is not None
        os.lseek(self._fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(self._fd, 1 << 16):
            chunks.append(chunk)
        out: dict[str, str] = {}
        for line in b"".join(chunks).splitlines():
            fields = line.split(b" ")
            try:
                fstype = fields[fields.index(b"-", 6) + 1].decode("ascii", "replace")
            except (ValueError, IndexError):
                continue
            if fstype in PSEUDO_TYPES:
                out[os.fsdecode(_ESCAPE.sub(lambda m: bytes([int(m.group(1), 8)]), fields[4]))] = fstype
        return out


_TABLE = MountTable()


def pseudo_fs(path: str) -> str | None:
    """The type of the pseudo file system mounted at ``path`` (e.g. "proc" for /proc), else None.
    Only mount points answer: what lies below one is reached through it."""
    return _TABLE.pseudo().get(os.path.abspath(path))


def pseudo_below(root: str) -> frozenset[str]:
    """The mount points of pseudo file systems strictly below ``root``, as paths under ``root``
    as given (a root reached through a symlink has them under its own name), for a walk to leave
    out. Empty for most folders: only those holding such a mount have any."""
    mounts = _TABLE.pseudo()
    if not mounts:
        return frozenset()
    root = os.path.abspath(root)
    real = os.path.realpath(root)
    prefix = real.rstrip(os.sep) + os.sep
    return frozenset(root.rstrip(os.sep) + os.sep + m[len(prefix):] for m in mounts if m.startswith(prefix))
