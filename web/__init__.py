"""The search page and REST API the daemon serves (docs/web.md): a Starlette application answering
through the daemon's own ops, as the logged-in account; uvicorn serves it on the daemon's thread.

Imported only when the setting web is on: a daemon without it loads none of Starlette or Jinja2.
"""

from __future__ import annotations

from deskdex import lazy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .app import Backend
    from .auth import Account
    from .server import WebServer, read_url

__getattr__ = lazy.names(__name__, {"Account": ".auth", "Backend": ".app", "WebServer": ".server",
                                    "read_url": ".server"})
__all__ = ["Account", "Backend", "WebServer", "read_url"]
