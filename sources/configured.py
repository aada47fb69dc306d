"""A configured source (a ``[[sources]]`` table) opened as its URL's module reads it, with its
password from the keyring or its command, its account, and the enterprise-mode options."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Mapping

from .base import Options
from .credentials import password_of
from .registry import open_source

if TYPE_CHECKING:
    from .base import RemoteSource
    from .config import SourceEntry


def open_entry(entry: SourceEntry, sid_map: Mapping[str, str] | None = None, rights: bool = False,
               timeout: float = 30.0) -> RemoteSource:
    """The source ``entry`` configures, not connected yet (its password is asked at each login).
    ``rights``: enterprise mode, each item's readers from the server's rights, SIDs through ``sid_map``."""
    options = Options(entry.user, rights=rights, sid_map=dict(sid_map or {}))
    return open_source(entry.url, functools.partial(password_of, entry), timeout, options)
