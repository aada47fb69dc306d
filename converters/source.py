"""What a converter reads: a file on disk or bytes held in memory (a member of an archive, an HTTP body)."""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, BinaryIO
from urllib.parse import quote, unquote_to_bytes, urlsplit

from deskdex.errors import NotRegular, SizeLimit, UnreadableFile, Vanished
from deskdex.paths import display_path, path_to_uri  # a file's two names, moved to the core

if TYPE_CHECKING:
    from .privilege import RunAs


@dataclass(frozen=True, slots=True)
class Source:
    uri: str
    name: str  # the file or member name, for detection by extension
    path: str | None = None  # on disk, or None when ``data`` holds the bytes
    data: bytes | None = None
    mime: str | None = None  # a hint from outside (HTTP Content-Type); detection may overrule it
    depth: int = 0  # how many containers deep this member is
    # Enterprise mode: the account whose rights convert it (its converter process runs as that
    # account, deskdex.converters.privilege), and a symlink at ``path`` is never followed.
    run_as: RunAs | None = None

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], run_as: RunAs | None = None) -> "Source":
        p = os.path.abspath(os.fspath(path))
        return cls(uri=path_to_uri(p), name=display_path(os.path.basename(p)), path=p, run_as=run_as)

    def size(self) -> int:
        if self.data is not None:
            return len(self.data)
        assert self.path is not None
        try:
            st = os.stat(self.path, follow_symlinks=self.run_as is None)
        except OSError as exc:
            raise unreadable(self.path, exc) from exc
        check_regular(self.path, st)
        return st.st_size

    def read(self, limit: int | None = None) -> bytes:
        """All the bytes, refusing more than ``limit``."""
        if limit is not None and self.size() > limit:
            raise SizeLimit(f"{self.size()} bytes is over the {limit}-byte limit")
        if self.data is not None:
            return self.data
        assert self.path is not None
        with open_regular(self.path, nofollow=self.run_as is not None) as f:
            try:
                data = f.read() if limit is None else f.read(limit + 1)
            except OSError as exc:
                raise unreadable(self.path, exc) from exc
        if limit is not None and len(data) > limit:  # it grew since the size was checked
            raise SizeLimit(f"over the {limit}-byte limit")
        return data

    def head(self, n: int = 8192) -> bytes:
        if self.data is not None:
            return self.data[:n]
        assert self.path is not None
        with open_regular(self.path, nofollow=self.run_as is not None) as f:
            try:
                return f.read(n)
            except OSError as exc:
                raise unreadable(self.path, exc) from exc

    def open(self) -> BinaryIO:
        """The file, checked to be a regular one (see ``open_regular``); a member's bytes in memory."""
        if self.data is not None:
            import io

            return io.BytesIO(self.data)
        assert self.path is not None
        return open_regular(self.path, nofollow=self.run_as is not None)

    def child(self, inner: str, data: bytes, mime: str | None = None) -> "Source":
        """A member of this container, addressed as ``parent#inner/path``."""
        # Each level of nesting adds its own "#": a.zip#dir/b.tar#c.txt stays unambiguous.
        uri = self.uri + "#" + quote(_raw(inner.lstrip("/")), safe="/")
        return Source(uri=uri, name=display_path(inner.rsplit("/", 1)[-1]), data=data, mime=mime,
                      depth=self.depth + 1)


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a symbolic link"))


def special_kind(mode: int) -> str | None:
    """What a file that is not a regular one is ("a FIFO"...); None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "an unknown kind of file")


def check_regular(path: str, st: os.stat_result) -> None:
    """Raise NotRegular unless ``st`` (of an open descriptor, so what is read is what was checked)
    is a regular file's; the message names what it is instead and ``path``."""
    kind = special_kind(st.st_mode)
    if kind is not None:
        raise NotRegular(f"{kind}, not a regular file: {display_path(path)}")


def open_regular(path: str, nofollow: bool = False) -> BinaryIO:
    """Open a user's file for reading, the one way every file is opened: without blocking (a file
    swapped for a FIFO since it was listed must not hang the reader), then checked on the open
    descriptor, so what is read is what was checked. ``nofollow``: a symlink at ``path`` is
    refused (enterprise mode: symlinks are never followed out of the home that holds them).
    Raises UnreadableFile (NotRegular for a FIFO, socket, device or refused symlink)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    if nofollow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if nofollow and exc.errno == errno.ELOOP:
            raise NotRegular(f"a symbolic link, not followed: {display_path(path)}") from exc
        raise unreadable(path, exc) from exc
    try:
        st = os.fstat(fd)
        check_regular(path, st)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # a regular file: reads never block on O_NONBLOCK anyway
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def unreadable(path: str, exc: OSError) -> UnreadableFile:
    """The error to raise for an OSError opening or reading ``path``: Vanished when it is gone,
    else UnreadableFile saying why (permission denied, or the system's words)."""
    shown = display_path(path)
    if exc.errno == errno.ENOENT:
        return Vanished(f"vanished before it could be read: {shown}")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return UnreadableFile(f"permission denied: {shown}")
    return UnreadableFile(f"{exc.strerror or exc}: {shown}")


# A file's two names, its URI and its display path: core/paths.py (path_to_uri, display_path).
def _raw(path: str) -> bytes:
    return path.encode("utf-8", "surrogateescape")


def uri_to_path(uri: str) -> str | None:
    """The file on disk a ``file://`` URI names (for a member, the container file), byte for byte."""
    parts = urlsplit(uri)
    if parts.scheme != "file":
        return None
    return unquote_to_bytes(parts.path).decode("utf-8", "surrogateescape")
