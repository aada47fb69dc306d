"""What a converter reads: a file on disk or bytes held in memory (a member of an archive, an HTTP body)."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit

from deskdex.errors import SizeLimit, UnreadableFile


@dataclass(frozen=True, slots=True)
class Source:
    uri: str
    name: str  # the file or member name, for detection by extension
    path: str | None = None  # on disk, or None when ``data`` holds the bytes
    data: bytes | None = None
    mime: str | None = None  # a hint from outside (HTTP Content-Type); detection may overrule it
    depth: int = 0  # how many containers deep this member is

    @classmethod
    def from_path(cls, path: str | os.PathLike[str]) -> "Source":
        p = os.path.abspath(os.fspath(path))
        return cls(uri=path_to_uri(p), name=os.path.basename(p), path=p)

    def size(self) -> int:
        if self.data is not None:
            return len(self.data)
        assert self.path is not None
        try:
            return os.stat(self.path).st_size
        except OSError as exc:
            raise _unreadable(self.path, exc) from exc

    def read(self, limit: int | None = None) -> bytes:
        """All the bytes, refusing more than ``limit``."""
        if limit is not None and self.size() > limit:
            raise SizeLimit(f"{self.size()} bytes is over the {limit}-byte limit")
        if self.data is not None:
            return self.data
        assert self.path is not None
        try:
            with open(self.path, "rb") as f:
                return f.read()
        except OSError as exc:
            raise _unreadable(self.path, exc) from exc

    def head(self, n: int = 8192) -> bytes:
        if self.data is not None:
            return self.data[:n]
        assert self.path is not None
        try:
            with open(self.path, "rb") as f:
                return f.read(n)
        except OSError as exc:
            raise _unreadable(self.path, exc) from exc

    def child(self, inner: str, data: bytes, mime: str | None = None) -> "Source":
        """A member of this container, addressed as ``parent#inner/path``."""
        # Each level of nesting adds its own "#": a.zip#dir/b.tar#c.txt stays unambiguous.
        uri = self.uri + "#" + quote(inner.lstrip("/"), safe="/")
        return Source(uri=uri, name=inner.rsplit("/", 1)[-1], data=data, mime=mime, depth=self.depth + 1)


def _unreadable(path: str, exc: OSError) -> UnreadableFile:
    if exc.errno == errno.ENOENT:
        return UnreadableFile(f"vanished before it could be read: {path}")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return UnreadableFile(f"permission denied: {path}")
    return UnreadableFile(f"{exc.strerror or exc}: {path}")


def path_to_uri(path: str) -> str:
    return "file://" + quote(path, safe="/")


def uri_to_path(uri: str) -> str | None:
    """The file on disk a ``file://`` URI names (for a member, the container file)."""
    parts = urlsplit(uri)
    if parts.scheme != "file":
        return None
    return unquote(parts.path)
