"""Where deskdex keeps its state: platformdirs by default, all of it under one folder with
``--home DIR`` or ``DESKDEX_HOME`` (what the tests use). Folders are 0700, private to the user."""

from __future__ import annotations

import os
from dataclasses import dataclass

import platformdirs

APP = "deskdex"
ENV = "DESKDEX_HOME"


@dataclass(frozen=True, slots=True)
class Home:
    config_dir: str
    data_dir: str
    runtime_dir: str

    @classmethod
    def resolve(cls, home: str | None = None) -> "Home":
        home = home or os.environ.get(ENV)
        if home:
            home = os.path.abspath(os.path.expanduser(home))
            return cls(os.path.join(home, "config"), os.path.join(home, "data"), os.path.join(home, "run"))
        return cls(platformdirs.user_config_dir(APP), platformdirs.user_data_dir(APP),
                   platformdirs.user_runtime_dir(APP))

    @property
    def config_file(self) -> str:
        return os.path.join(self.config_dir, "config.toml")

    @property
    def socket(self) -> str:
        return os.path.join(self.runtime_dir, "deskdex.sock")

    def ensure(self) -> "Home":
        for d in (self.config_dir, self.data_dir, self.runtime_dir):
            os.makedirs(d, mode=0o700, exist_ok=True)
            os.chmod(d, 0o700)
        return self
