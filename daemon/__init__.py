"""The long-running process: its main loop (loop.py, with the parts it holds: workqueue.py, views.py,
stall.py, retries.py), the socket server and its ops, the shard server, the config watch.

Other packages use the names of ``__all__`` alone, imported from here (tests/test_layout.py), each
taken from its module on first use (core/lazy.py).
"""

from __future__ import annotations

from deskdex import lazy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .configwatch import load_for_daemon
    from .loop import Daemon
    from .run import run_daemon
    from .shardserver import ShardServer
    from .shardserver import serve as serve_shard

__getattr__ = lazy.names(__name__, {"load_for_daemon": ".configwatch", "Daemon": ".loop", "run_daemon": ".run",
                                    "ShardServer": ".shardserver", "serve_shard": ".shardserver:serve"})
__all__ = ["Daemon", "ShardServer", "load_for_daemon", "run_daemon", "serve_shard"]
