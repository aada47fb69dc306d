"""Past one machine: conversions and crawl requests handed to ``deskdex worker`` processes through Celery, with Redis as
the broker (docs/scale-out.md). Nothing here is imported unless a broker is configured: Celery is an
optional dependency (``pip install 'deskdex[cluster]'``), and a desktop install never loads it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from deskdex import lazy

from .queues import CRAWL_QUEUES, crawl_queue_name

if TYPE_CHECKING:
    from deskdex.settings import Config

    from .app import run_worker
    from .crawling import RemoteCrawl
    from .pool import RemotePool
    from .status import cluster_status, describe

# What other packages use, besides the functions below; the Celery modules load on first use.
__getattr__ = lazy.names(__name__, {"run_worker": ".app", "RemoteCrawl": ".crawling", "RemotePool": ".pool",
                                    "cluster_status": ".status", "describe": ".status"})
__all__ = [
    "BROKER_FILE", "CRAWL_QUEUES", "LIBRARIES", "RemoteCrawl", "RemotePool", "check_setting", "cluster_status",
    "crawl_queue_name", "describe", "record_broker", "recorded_broker", "remote_crawl", "run_worker",
]

# What ``pip install 'deskdex[cluster]'`` brings: an ImportError naming one of them says to install it.
LIBRARIES = frozenset({"celery", "kombu", "billiard", "vine", "redis"})


def _missing_library(exc: ImportError) -> bool:
    """Whether ``exc`` is the cluster extra not being installed (rather than a bug of ours)."""
    return (exc.name or "").partition(".")[0] in LIBRARIES


def check_setting(broker: str, system: bool) -> None:
    """Refuse, before anything starts, a broker the daemon could not use: enterprise mode (every
    file is read with its owner's rights, here), or Celery not installed. ConfigError says how."""
    from deskdex.errors import ConfigError

    if not broker:
        return
    if system:
        raise ConfigError("setting broker: enterprise mode (--system) reads every file with its owner's rights on "
                          "this machine and cannot hand files to workers; remove the setting")
    try:
        from . import pool  # noqa: F401  (Celery and redis with it)
    except ImportError as exc:
        if not _missing_library(exc):
            raise
        raise ConfigError(f"a broker needs Celery and redis ({exc.name} is missing): "
                          "pip install 'deskdex[cluster]'") from exc


# In a running daemon's runtime folder (private to its user): the broker it hands its files to,
# given by --broker or the setting, so that `deskdex status` shows the same cluster either way.
BROKER_FILE = "broker"


def record_broker(runtime_dir: str, broker: str) -> None:
    """Say in ``runtime_dir`` which broker the daemon starting there uses (none: the record goes)."""
    import os

    path = os.path.join(runtime_dir, BROKER_FILE)
    if not broker:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return
    fd = os.open(path + ".new", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)  # it may hold a password
    with os.fdopen(fd, "w") as f:
        f.write(broker)
    os.replace(path + ".new", path)


def recorded_broker(runtime_dir: str) -> str:
    """The broker the daemon of ``runtime_dir`` said it uses ("" if none): ask it only while it answers."""
    import os

    try:
        with open(os.path.join(runtime_dir, BROKER_FILE)) as f:
            return f.read().strip()
    except OSError:
        return ""


def remote_crawl(cfg: Config) -> RemoteCrawl | None:
    """Crawls through the workers of ``cfg``'s broker (close it when done), or None without one."""
    broker = cfg.settings.broker
    if not broker:
        return None
    check_setting(broker, system=False)
    from deskdex.converters import Limits

    from .crawling import RemoteCrawl

    return RemoteCrawl(broker, cfg.settings.redelivery, Limits.from_settings(cfg), cfg.settings.crawl.shard_timeout)
