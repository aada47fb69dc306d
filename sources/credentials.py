"""A source's password: from the system keyring (Secret Service, KWallet, macOS Keychain, Windows
Credential Locker, through ``keyring``), or printed by a command the user configured. Never from
the config file, never written anywhere by deskdex but the keyring.

The keyring entry is the service ``deskdex`` and the source's URL as the user name, so that two
accounts on one server never share a password. ``keyring`` picks the desktop's backend, and
honours ``PYTHON_KEYRING_BACKEND`` (the tests point it at a keyring of their own).
"""

from __future__ import annotations

import shlex
import subprocess

from deskdex.errors import SourceRefused

from .config import SourceEntry

SERVICE = "deskdex"
COMMAND_SECONDS = 60.0  # a password command may ask the user (a GPG agent's pinentry)


def password_of(entry: SourceEntry) -> str:
    """The password of ``entry``; SourceRefused saying why there is none."""
    if entry.password_command:
        return _from_command(entry.url, entry.password_command)
    import keyring  # its backends are looked for on import: only when a password is wanted
    from keyring.errors import KeyringError

    try:
        password: str | None = keyring.get_password(SERVICE, entry.url)
    except KeyringError as exc:
        raise SourceRefused(f"{entry.url}: the system keyring cannot be read ({exc}); configure a password "
                            "command instead (deskdex source add URL --password-command CMD)") from exc
    if password is None:
        raise SourceRefused(f"{entry.url}: no password in the system keyring (deskdex source add {entry.url} "
                            "asks for it), and no password_command")
    return password


def store_password(url: str, password: str) -> None:
    """Keep ``password`` for ``url`` in the system keyring; SourceRefused when there is none usable."""
    import keyring
    from keyring.errors import KeyringError

    try:
        keyring.set_password(SERVICE, url, password)
    except KeyringError as exc:
        raise SourceRefused(f"no system keyring to keep the password of {url} in ({exc}): use --password-command "
                            "CMD, a command that prints it (pass, secret-tool, gpg --decrypt ...)") from exc


def forget_password(url: str) -> None:
    """Remove the keyring entry of ``url`` (nothing if there is none or no keyring)."""
    import keyring
    from keyring.errors import KeyringError

    try:
        keyring.delete_password(SERVICE, url)
    except KeyringError:
        pass


def _from_command(url: str, command: str) -> str:
    try:
        done = subprocess.run(shlex.split(command), capture_output=True, timeout=COMMAND_SECONDS, stdin=subprocess.DEVNULL)
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        raise SourceRefused(f"{url}: the password command {command!r} could not run: {exc}") from exc
    if done.returncode != 0:
        why = done.stderr.decode(errors="replace").strip().splitlines()
        raise SourceRefused(f"{url}: the password command {command!r} failed (exit {done.returncode})"
                            + (f": {why[-1]}" if why else ""))
    lines = done.stdout.decode(errors="surrogateescape").splitlines()
    if not lines or not lines[0]:
        raise SourceRefused(f"{url}: the password command {command!r} printed nothing")
    return lines[0]
