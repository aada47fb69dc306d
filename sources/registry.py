"""Which module reads which kind of source: one table of URL schemes, as the converters' formats are.

A new kind of source (WebDAV, S3) is one module with a RemoteSource subclass and one line here.
Modules are imported when a source of theirs is opened, so a missing library (imapclient,
smbprotocol) turns off that kind alone, with one clear error.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Callable
from urllib.parse import urlsplit

from deskdex.errors import ConfigError, NotConfigured

from .base import Options

if TYPE_CHECKING:
    from .base import RemoteSource

# URL scheme -> (module:class, the Python package it needs, what a source of it is).
SCHEMES: dict[str, tuple[str, str, str]] = {
    "imap": ("deskdex.sources.imap:ImapSource", "imapclient", "a mail account (IMAP; STARTTLS unless on this machine)"),
    "imaps": ("deskdex.sources.imap:ImapSource", "imapclient", "a mail account (IMAP over TLS)"),
    "smb": ("deskdex.sources.smb:SmbSource", "smbprotocol", "a folder of a network share (SMB 2/3)"),
}


def scheme_of(url: str) -> str:
    """The scheme of a source's URL; ConfigError for one no source reads."""
    scheme = urlsplit(url).scheme.lower()
    if scheme not in SCHEMES:
        raise ConfigError(f"{url!r}: not a source deskdex reads (its URL starts with one of "
                          f"{', '.join(s + '://' for s in SCHEMES)})")
    return scheme


def open_source(url: str, password: Callable[[], str], timeout: float = 30.0,
                options: Options | None = None) -> RemoteSource:
    """The source of ``url``, not connected yet. NotConfigured when its library is missing."""
    target, package, _ = SCHEMES[scheme_of(url)]
    module, _, name = target.partition(":")
    try:
        cls: type[RemoteSource] = getattr(importlib.import_module(module), name)
    except ImportError as exc:
        raise NotConfigured(f"{url}: the Python package {package} is missing ({exc})") from exc
    return cls(url, password, timeout, options or Options())
