"""The clients of the daemon: the ``deskdex`` command line (launch, cli, reading, managing), the socket
client, result rendering, the user service, the tray, and the Python API (api.py), whose names are
this package's public ones, re-exported by ``deskdex`` itself and loaded on first use (core/lazy.py).

A regular package, not an implicit namespace one: setuptools' default editable install cannot import a
namespace subpackage mapped with package-dir from outside its parent's folder (pypa/setuptools#4943),
so ``pip install -e .`` would fail on ``import deskdex.clients`` (tests/test_installed.py checks it).
"""

from deskdex import lazy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .api import Block, Document, Duplicate, Hit, Results, Status, document, duplicates, search, similar, status

__all__ = ["Block", "Document", "Duplicate", "Hit", "Results", "Status", "document", "duplicates", "search",
           "similar", "status"]
__getattr__ = lazy.names(__name__, dict.fromkeys(__all__, ".api"))
