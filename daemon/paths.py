"""Where deskdex keeps its state: platformdirs by default, all of it under one folder with
``--home DIR`` or ``DESKDEX_HOME`` (what the tests use). Folders are 0700, private to the user.

The enterprise-mode daemon (``deskdex daemon --system``) keeps its state in system folders:
/var/lib/deskdex, /etc/deskdex and /run/deskdex (platformdirs' site runtime dir). Its runtime
folder is 0755 so that every local user reaches the socket; data and config stay 0700."""

from __future__ import annotations

import os
from dataclasses import dataclass

from .launch import APP, ENV, SOCKET_NAME


@dataclass(frozen=True, slots=True)
class Home:
    config_dir: str
    data_dir: str
    runtime_dir: str

    @classmethod
    def resolve(cls, home: str | None = None, system: bool = False) -> "Home":
        home = home or os.environ.get(ENV)
        if home:
            home = os.path.abspath(os.path.expanduser(home))
            return cls(os.path.join(home, "config"), os.path.join(home, "data"), os.path.join(home, "run"))
        import platformdirs  # 15 ms to import: only when no home is given

        if system:
            # platformdirs' site data/config dirs are the XDG search paths for shared read-only
            # files (/usr/local/share, /etc/xdg); a service's state belongs in /var/lib.
            return cls(os.path.join("/etc", APP), os.path.join("/var/lib", APP), platformdirs.site_runtime_dir(APP))
        return cls(platformdirs.user_config_dir(APP), platformdirs.user_data_dir(APP),
                   platformdirs.user_runtime_dir(APP))

    @property
    def config_file(self) -> str:
        return os.path.join(self.config_dir, "config.toml")

    @property
    def socket(self) -> str:
        return os.path.join(self.runtime_dir, SOCKET_NAME)

    def ensure(self, system: bool = False) -> "Home":
        for d in (self.config_dir, self.data_dir, self.runtime_dir):
            mode = 0o755 if system and d == self.runtime_dir else 0o700
            os.makedirs(d, mode=mode, exist_ok=True)
            os.chmod(d, mode)
        return self
