"""Past one machine: conversions handed to ``deskdex worker`` processes through Celery, with Redis as
the broker (docs/scale-out.md). Nothing here is imported unless a broker is configured: Celery is an
optional dependency (``pip install 'deskdex[cluster]'``), and a desktop install never loads it."""

# What ``pip install 'deskdex[cluster]'`` brings: an ImportError naming one of them says to install it.
LIBRARIES = frozenset({"celery", "kombu", "billiard", "vine", "redis"})


def missing_library(exc: ImportError) -> bool:
    """Whether ``exc`` is the cluster extra not being installed (rather than a bug of ours)."""
    return (exc.name or "").partition(".")[0] in LIBRARIES
