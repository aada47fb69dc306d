"""The search window's history: the last queries searched, newest first, kept in one small JSON file
in the state folder (platformdirs' user state dir; under ``--home``/``DESKDEX_HOME``, that home's data
folder), so that they are offered again after the tray restarts.

A query counts once the user settles on it (search_window.py: its answer shown and no key typed for a
moment, or a result opened), not at every keystroke. A file that cannot be read or written costs the
history, never the window: it is logged and the window goes on."""

from __future__ import annotations

import json
import logging
import os
import tempfile

from deskdex.paths import APP, ENV, Home

logger = logging.getLogger(__name__)

KEEP = 50  # queries kept: more than a completer's popup shows, few enough to read at each start
FILE_NAME = "tray-history.json"


def history_file(home: str | None = None) -> str:
    """Where the tray of ``home`` (``--home``; None: $DESKDEX_HOME, else the user's folders) keeps
    its history."""
    if home or os.environ.get(ENV):
        return os.path.join(Home.resolve(home).data_dir, FILE_NAME)
    import platformdirs

    return os.path.join(platformdirs.user_state_dir(APP), FILE_NAME)


class History:
    """The last ``keep`` queries of the file at ``path`` (None: kept in memory only), newest first."""

    def __init__(self, path: str | None, keep: int = KEEP) -> None:
        self.path, self.keep = path, keep
        self.queries: list[str] = self._load()

    def _load(self) -> list[str]:
        if self.path is None or not os.path.exists(self.path):
            return []
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
            queries = data.get("queries") if isinstance(data, dict) else None
            if not isinstance(queries, list):
                raise ValueError("no list of queries in it")
            return [q for q in queries if isinstance(q, str) and q.strip()][: self.keep]
        except (OSError, ValueError) as exc:  # json's errors are ValueErrors
            logger.warning("search history %s not read (%s): starting a new one", self.path, exc)
            return []

    def add(self, query: str) -> bool:
        """Put ``query`` first (once); whether the history changed."""
        query = query.strip()
        if not query or (self.queries and self.queries[0] == query):
            return False
        self.queries = [query] + [q for q in self.queries if q != query][: self.keep - 1]
        self._save()
        return True

    def clear(self) -> None:
        self.queries = []
        self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        folder = os.path.dirname(self.path)
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            # written beside and renamed: a tray killed while writing leaves the old history whole
            fd, tmp = tempfile.mkstemp(prefix=".tray-history.", dir=folder)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump({"queries": self.queries}, f, ensure_ascii=False)
                os.replace(tmp, self.path)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError as exc:
            logger.warning("search history not saved to %s: %s", self.path, exc)
