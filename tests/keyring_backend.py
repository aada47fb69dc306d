"""A keyring backend for the tests: the entries in a JSON file named by $DESKDEX_TEST_KEYRING.

A test machine has no Secret Service (no desktop session, no D-Bus secrets daemon), so the tests
point keyring at this backend with PYTHON_KEYRING_BACKEND=keyring_backend.FileKeyring (and this
folder on PYTHONPATH): keyring's documented way to choose a backend. The code under test calls
keyring's public API exactly as it does on a desktop; only where the secret is kept differs."""

from __future__ import annotations

import json
import os
from pathlib import Path

from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError


class FileKeyring(KeyringBackend):
    priority = 1  # type: ignore[assignment]

    @property
    def _file(self) -> Path:
        return Path(os.environ["DESKDEX_TEST_KEYRING"])

    def _entries(self) -> dict[str, str]:
        try:
            return json.loads(self._file.read_text())
        except FileNotFoundError:
            return {}

    def get_password(self, service: str, username: str) -> str | None:
        return self._entries().get(f"{service}\n{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        entries = self._entries()
        entries[f"{service}\n{username}"] = password
        self._file.write_text(json.dumps(entries))

    def delete_password(self, service: str, username: str) -> None:
        entries = self._entries()
        if entries.pop(f"{service}\n{username}", None) is None:
            raise PasswordDeleteError(username)
        self._file.write_text(json.dumps(entries))
