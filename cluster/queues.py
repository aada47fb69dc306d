"""The cluster's crawl queues, named here rather than in the package's ``__init__``: the Celery app
(app.py) and the status (status.py) use them, and the package's ``__init__`` imports those modules
in its turn, which would make a cycle (tests/test_layout.py)."""

from __future__ import annotations

# A crawl's requests go to one of these queues by the hash of their site (webcrawl.urls.shard_of), so
# that a worker can be given some sites only (deskdex worker --crawl-queues) and status counts each.
CRAWL_QUEUES = 8


def crawl_queue_name(k: int) -> str:
    """The Celery queue of crawl queue ``k``, 0 to CRAWL_QUEUES - 1."""
    return f"deskdex.crawl.{k}"
