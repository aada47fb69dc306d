"""deskdex's version, as ``deskdex --version`` and ``deskdex --help`` show it."""

from __future__ import annotations


def version_line() -> str:
    """``deskdex X.Y.Z``, the installed distribution's version: the one pip and bug reports name.
    importlib.metadata is loaded only here, since it costs more than a search through the daemon."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"deskdex {version('deskdex')}"
    except PackageNotFoundError:  # run from a checkout that was never installed: no metadata to read
        return "deskdex (not installed: no version metadata)"
