"""Sources beyond the local disk: mail accounts (IMAP) and network shares (SMB), one module each,
chosen by the URL's scheme (``registry.SCHEMES``). A source lists folders of items and fetches
their bytes; the pipeline (deskdex.pipeline's SourceSync) converts and indexes them, and the
daemon keeps each configured source in sync (docs/sources.md)."""

from .base import Folder, Item, Options, RemoteSource
from .config import SourceEntry, normalise
from .config import add as add_source
from .config import find as find_source
from .config import load as load_sources
from .config import remove as remove_source
from .configured import open_entry
from .credentials import forget_password, password_of, store_password
from .registry import SCHEMES, open_source, scheme_of

__all__ = ["Folder", "Item", "Options", "RemoteSource", "SourceEntry", "normalise", "add_source", "find_source", "load_sources",
           "remove_source", "open_entry", "forget_password", "password_of", "store_password", "SCHEMES", "open_source", "scheme_of"]
