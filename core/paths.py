"""Where deskdex keeps its state: platformdirs by default, all of it under one folder with
``--home DIR`` or ``DESKDEX_HOME`` (what the tests use). Folders are 0700, private to the user.

The enterprise-mode daemon (``deskdex daemon --system``) keeps its state in system folders:
/var/lib/deskdex, /etc/deskdex and /run/deskdex. Its runtime folder is 0755 so that every local
user reaches the socket; data and config stay 0700.

Light on purpose (no dataclasses, no typing at run time): the ``deskdex`` command's fast path
(deskdex.clients.launch) finds the socket with it before anything else is loaded.
"""

from __future__ import annotations

import os
import sys

from .errors import ConfigError

TYPE_CHECKING = False  # typing itself is not imported: see above
if TYPE_CHECKING:
    from collections.abc import Container

APP = "deskdex"
ENV = "DESKDEX_HOME"  # one folder for config, data and socket
SOCKET_NAME = "deskdex.sock"
SYSTEM_CONFIG, SYSTEM_DATA, SYSTEM_RUNTIME = "/etc/deskdex", "/var/lib/deskdex", "/run/deskdex"


def at_or_under(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or lies below it (``/a/bc`` is not below ``/a/b``)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def folder_of(path: str, folders: Container[str]) -> str | None:
    """The deepest of ``folders`` that ``path`` is at or under, or None. ``folders`` holds
    absolute paths without a trailing "/" (``"/"`` itself aside), e.g. a set: each folder above
    ``path`` is looked up in it, so any number of folders costs the depth of ``path``, where a
    test of each folder in turn (or a SQL condition with a term per folder, which SQLite refuses
    past about 500: "Expression tree is too large") grows with their number."""
    while True:
        if path in folders:
            return path
        if path == "/" or "/" not in path:
            return None
        path = path.rsplit("/", 1)[0] or "/"


class Home:
    """The three folders of one deskdex installation: config, data and runtime (the socket)."""

    __slots__ = ("config_dir", "data_dir", "runtime_dir")

    def __init__(self, config_dir: str, data_dir: str, runtime_dir: str) -> None:
        self.config_dir = config_dir
        self.data_dir = data_dir
        self.runtime_dir = runtime_dir

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Home) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Home(config_dir={self.config_dir!r}, data_dir={self.data_dir!r}, runtime_dir={self.runtime_dir!r})"

    def _key(self) -> tuple[str, str, str]:
        return self.config_dir, self.data_dir, self.runtime_dir

    @classmethod
    def resolve(cls, home: str | None = None, system: bool = False) -> Home:
        """``--home`` (else $DESKDEX_HOME) as one folder; else the system folders (``system``);
        else the platform's user folders."""
        home = home or os.environ.get(ENV)
        if home:
            home = os.path.abspath(os.path.expanduser(home))
            return cls(os.path.join(home, "config"), os.path.join(home, "data"), os.path.join(home, "run"))
        if system:
            # platformdirs' site data/config dirs are the XDG search paths for shared read-only
            # files (/usr/local/share, /etc/xdg); a service's state belongs in /var/lib.
            return cls(SYSTEM_CONFIG, SYSTEM_DATA, SYSTEM_RUNTIME)
        import platformdirs  # 15 ms to import: only when no home is given

        data = platformdirs.user_data_dir(APP)
        return cls(platformdirs.user_config_dir(APP), data, user_runtime_dir())

    @property
    def config_file(self) -> str:
        return os.path.join(self.config_dir, "config.toml")

    @property
    def socket(self) -> str:
        return os.path.join(self.runtime_dir, SOCKET_NAME)

    def ensure(self, system: bool = False) -> Home:
        """Create the folders (0700; a system daemon's runtime folder 0755), or say why not."""
        for d in (self.config_dir, self.data_dir, self.runtime_dir):
            mode = 0o755 if system and d == self.runtime_dir else 0o700
            try:
                os.makedirs(d, mode=mode, exist_ok=True)
                os.chmod(d, mode)
            except (FileExistsError, NotADirectoryError):
                raise ConfigError(f"cannot use {d} as a folder: a file is in the way "
                                  "(--home must name a folder)") from None
            except OSError as exc:
                raise ConfigError(f"cannot create {d}: {exc.strerror}") from None
        return self

    def check(self) -> Home:
        """Without creating anything: refuse a home whose folders are files (``--home FILE``)."""
        for d in (self.config_dir, self.data_dir, self.runtime_dir):
            parent = d
            while parent and not os.path.lexists(parent):
                parent = os.path.dirname(parent) if os.path.dirname(parent) != parent else ""
            if parent and not os.path.isdir(parent):
                raise ConfigError(f"cannot use {parent} as a folder: it is a file (--home must name a folder)")
        return self


def user_runtime_dir() -> str:
    """Where the socket of a user's daemon lives, the same for the daemon and every client.

    On Linux: ``linux_runtime_dir()``, else ``linux_fallback_runtime_dir()``. platformdirs is not
    asked there: it warns on every call where XDG_RUNTIME_DIR is unset, and it takes 15 ms to
    import, which the command's fast path cannot spend.
    """
    if sys.platform.startswith("linux"):
        return linux_runtime_dir() or linux_fallback_runtime_dir()
    import warnings

    import platformdirs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return platformdirs.user_runtime_dir(APP)


def linux_runtime_dir() -> str | None:
    """$XDG_RUNTIME_DIR/deskdex; without it (ssh without pam_systemd, cron, containers)
    /run/user/UID/deskdex when that folder is the user's (it is what XDG_RUNTIME_DIR names where it
    is set, so a cron job finds the daemon a desktop session started); else None."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime):
        return os.path.join(runtime, APP)
    run_user = f"/run/user/{os.getuid()}"
    try:
        st = os.stat(run_user)
    except OSError:
        return None
    return os.path.join(run_user, APP) if st.st_uid == os.getuid() and not st.st_mode & 0o077 else None


def linux_fallback_runtime_dir() -> str:
    """Where the socket lives on Linux with no runtime folder (``linux_runtime_dir()`` is None):
    ``run`` in the user's data folder, found here as the XDG spec says ($XDG_DATA_HOME, else
    ~/.local/share), not through platformdirs, so that the command's fast path finds the socket
    without importing it. The daemon and every client ask this one function, so they agree even
    where platformdirs would name another data folder (a relative $XDG_DATA_HOME, which the spec
    says to ignore)."""
    data_home = os.environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(data_home):
        data_home = os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(data_home, APP, "run")


# File names are bytes. Python gives those that are not UTF-8 (old archives, USB sticks) as str
# with lone surrogates (PEP 383), which no UTF-8 codec, SQLite or tantivy accepts. So a file has
# two names: its URI, which percent-encodes the exact bytes and is how the index finds the file
# again, and its display path, where such bytes show as U+FFFD, which is only ever shown.
def display_path(path: str) -> str:
    """``path`` as text that can be stored and printed: bytes that are not UTF-8 shown as U+FFFD."""
    try:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a surrogate that stands for no byte: not from a file system
        return path.encode("utf-8", "replace").decode("utf-8")


def path_to_uri(path: str) -> str:
    """The ``file://`` URI of ``path``: its exact bytes, percent-encoded (``uri_to_path`` in
    converters/source.py reads it back)."""
    if path.isascii() and not path.translate(_QUOTE_NOTHING):
        return "file://" + path  # what quote() gives such a path, in a quarter of its time
    from urllib.parse import quote  # here: the command's fast path imports this module, not urllib

    return "file://" + quote(path.encode("utf-8", "surrogateescape"), safe="/")


# The characters quote(safe="/") leaves as they are: a path of these alone is its own URI path.
_QUOTE_NOTHING = str.maketrans("", "", "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/")
