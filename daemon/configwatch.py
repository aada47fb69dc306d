"""The daemon's settings: whatever config.toml holds, the daemon starts, and it follows the file.

At start (``load_for_daemon``) the file is read leniently (core/settings.py: a value that does not
fit is reported and its default used; a pattern of ``exclude`` that does not compile is left out).
A file that is not TOML at all (a syntax error, bytes that are not UTF-8) cannot be read in part:
the daemon then starts on the LAST GOOD settings, a copy of the file as it was when last read whole
(``DATA/config.last-good.toml``), else (no copy yet: a first start) on the built-in defaults. The
last good settings, not the defaults: the defaults index the Documents folder (enterprise mode:
every account's home), so a typo would widen what is indexed and drop a ``shard`` restriction.

Enterprise mode (``--system``) does not use ``listen`` (a served shard answers every search with
everything, where each account may see only what it may read) nor ``broker`` (every file is read
here with its owner's rights, which workers on other machines do not have): they are reported and
left empty, instead of keeping the daemon of every user of the machine from starting.

While the daemon runs (``ConfigWatch``), an inotify watch on the config folder sees config.toml
written, replaced or removed: a hand edit is applied as the commands' changes are (``apply``:
folders watched or dropped, exclusions applied by a rescan, crawls reloaded); settings read once at
start are logged as taking effect on the next start. A file that cannot be read keeps the daemon
on the settings it runs on. What is wrong is in ``status`` (``settings_problems``) and the log
until the file is fixed. The watch is ``FolderWatch`` (pipeline/inotify.py), an inotify instance of
its own on the kernel's interface: its thread sleeps in poll() with no timeout, so an idle daemon
does not wake for it. Where there is no inotify (not Linux), only the commands' changes apply.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from deskdex import settings
from deskdex.errors import ConfigError
from deskdex.paths import Home
from deskdex.pipeline import Deleted, FolderWatch, Record, Rescan, inotify
from deskdex.settings import Config

if TYPE_CHECKING:
    from .loop import Daemon

logger = logging.getLogger(__name__)

LAST_GOOD = "config.last-good.toml"  # in the data folder: the file as last read whole
SETTLE = 0.3  # seconds without another event before the file is read: an editor writes in steps

# Read at each use: a change applies at once. Every other setting is read when the daemon starts.
LIVE = frozenset({"folders", "exclude", "index_on_battery", "release_after", "warm_for", "cpu_budget", "sources",
                  "source_interval"} |
                 {s.name for s in settings.SETTINGS if s.table == "crawl"})

NOT_IN_SYSTEM_MODE = {
    "listen": "a served shard answers every search with everything, where each account may see only what it "
              "may read",
    "broker": "every file is read here with its owner's rights, which workers on other machines do not have",
}


def load_for_daemon(home: Home, system: bool) -> tuple[Config, list[str]]:
    """The settings a daemon starts on, and what of the file is not used (for ``status``)."""
    problems: list[str] = []
    values = _read(home, problems)
    return Config(_for_mode(values, system, home.config_file, problems), home), problems


def _read(home: Home, problems: list[str]) -> dict[str, Any]:
    """The file's settings, leniently; for a file that cannot be read at all, the last good ones."""
    last_good = os.path.join(home.data_dir, LAST_GOOD)
    try:
        raw = _raw(home.config_file)
        values = settings.parse(raw, home.config_file, problems)
    except ConfigError as exc:
        try:
            kept = settings.parse(_raw(last_good), home.config_file, [])
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(os.stat(last_good).st_mtime))
            problems.append(f"{exc} (the daemon uses the settings the file had when last read whole, {when})")
            return kept
        except (ConfigError, OSError):
            problems.append(f"{exc} (the daemon uses the built-in defaults: the file was never read whole)")
            return dict(settings.DEFAULTS)
    _keep(last_good, raw)
    return values


def _raw(path: str) -> bytes:
    """The bytes of a config file (none: empty, as the defaults are); ConfigError if unreadable."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror}") from exc


def _keep(path: str, raw: bytes) -> None:
    """Keep ``raw`` as the last good settings (private, as the config file is)."""
    try:
        tmp = path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.replace(tmp, path)
    except OSError as exc:  # a full disk: the daemon runs on, with no copy to start on next time
        logger.warning("cannot keep a copy of the settings in %s: %s", path, exc.strerror)


def _for_mode(values: dict[str, Any], system: bool, path: str, problems: list[str]) -> dict[str, Any]:
    if not system:
        return values
    for name, why in NOT_IN_SYSTEM_MODE.items():
        if values[name]:
            problems.append(f"{path}: {name} is not used in enterprise mode (--system): {why} (ignored)")
            values[name] = ""
    return values


def apply(daemon: Daemon, new: Config) -> list[str]:
    """Run ``daemon`` on ``new`` as the commands' changes do; the names of the settings changed."""
    old = daemon.cfg
    changed = sorted(n for n in settings.BY_NAME if old.values.get(n) != new.values.get(n))
    if not changed:
        return []
    before = set(daemon.folders())
    daemon.cfg = new
    after = set(daemon.folders())
    records: list[Record] = [Deleted(p, True) for p in sorted(before - after)]
    records += [Rescan(p, "settings") for p in sorted(after - before)]
    watcher = daemon.watcher
    if watcher is not None:
        for p in sorted(before - after):
            watcher.remove(p)
        for p in sorted(after - before):
            watcher.add(p)
        if "exclude" in changed:
            watcher.set_patterns(new.settings.exclude)
    if "exclude" in changed:  # newly excluded files leave, re-included ones come back
        records += [Rescan(p, "settings") for p in sorted(after & before)]
    if records:
        daemon.enqueue(records)
    if any(n.startswith("crawl.") for n in changed):
        try:
            daemon.crawls.reload()
        except ConfigError as exc:
            daemon.note(f"configured crawls not reloaded: {exc}")
    if "sources" in changed or "source_interval" in changed:
        try:
            daemon.sources.reload()
        except ConfigError as exc:
            daemon.note(f"sources not reloaded: {exc}")
    later = [n for n in changed if n not in LIVE]
    logger.info("settings changed in %s: %s", new.home.config_file, ", ".join(changed))
    if later:
        daemon.note(f"settings changed in the config file take effect when the daemon starts again: "
                    f"{', '.join(later)}")
    return changed


def reload(daemon: Daemon) -> None:
    """Read the config file again: apply it, or keep the settings the daemon runs on, and say why."""
    with daemon.settings_lock:  # read and applied in one turn with the ops that save the file
        _reload(daemon)


def _reload(daemon: Daemon) -> None:
    home = daemon.cfg.home
    problems: list[str] = []
    values: dict[str, Any] | None = None
    try:
        raw = _raw(home.config_file)
        values = _for_mode(settings.parse(raw, home.config_file, problems), daemon.system, home.config_file,
                           problems)
    except ConfigError as exc:
        problems = [f"{exc} (the daemon keeps the settings it runs on)"]
    else:
        _keep(os.path.join(home.data_dir, LAST_GOOD), raw)
    if problems != daemon.settings_problems:
        for problem in problems:
            logger.warning("setting: %s", problem)
        if not problems:
            logger.info("the config file %s is fine again", home.config_file)
        daemon.settings_problems = problems
    if values is not None:
        apply(daemon, daemon.cfg.given_over(values))


class ConfigWatch:
    """Reloads the daemon's settings whenever its config file changes (module docstring)."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.path = daemon.cfg.home.config_file
        self._changed = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="deskdex-config", daemon=True)
        self._watch: FolderWatch | None = None

    def start(self) -> ConfigWatch:
        if not inotify.available():  # not Linux: the commands' changes still apply
            logger.info("config file changes are not followed here (no inotify)")
            return self
        # An instance of its own: through the file watcher's, this folder's watch would be one of its
        # tree's, were the folder under a watched one.
        watch = FolderWatch(os.path.dirname(self.path), [os.path.basename(self.path)], self._changed.set,
                            self._gone, name="deskdex-config-inotify")
        try:
            self._watch = watch.start()
        except OSError as exc:  # past the limit of inotify instances, or the folder cannot be watched
            self.daemon.note(f"config file changes are not followed (cannot watch its folder: {exc})")
            return self
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._changed.set()
        if self._watch is not None:
            self._watch.stop()
        if self._thread.is_alive():
            self._thread.join()

    def _gone(self) -> None:  # on the watch's thread
        if not self._stop.is_set():
            self.daemon.note("the config folder is gone: config file changes are no longer followed")

    def _run(self) -> None:
        while True:
            self._changed.wait()  # no timeout: nothing wakes while the file does not change
            while self._changed.is_set() and not self._stop.is_set():
                self._changed.clear()
                self._stop.wait(SETTLE)  # the events of one save come together
            if self._stop.is_set():
                return
            try:
                reload(self.daemon)
            except Exception:  # a bug here must not end the watch, nor the daemon
                logger.exception("could not apply the config file's settings")
