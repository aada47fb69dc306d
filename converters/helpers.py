"""Helper programs (antiword, catppt, djvutxt, ps2ascii...) that convert formats no Python library reads,
as Recoll's filters do: found on PATH, run on one file inside the converter worker, under its limits.

A helper runs with the worker's rights, priority and memory limit (it inherits them), and dies with the
worker: the pool kills a worker past its time limit with SIGKILL, which a child would outlive, so each
helper asks the kernel for SIGKILL when its parent dies (PR_SET_PDEATHSIG). A missing helper is
``HelperMissing`` (reason ``helper_missing``, tried again later), never a name-only document.

Each run has a private temporary folder (the helper's working folder, HOME and TMPDIR, where a
member's bytes are copied), removed afterwards even when the worker is killed at the time limit,
which skips every ``finally``: a small shell, started beside the helper, waits for the end of a pipe
only this process writes to, which the kernel closes when this process dies, and then removes the
folder (``_private_folder``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
from typing import Iterator, Sequence

from deskdex.errors import CorruptFile, HelperMissing, TimeLimit

from .convert import current_limits
from .registry import Need, which
from .source import Source

__all__ = ["MAX_OUTPUT", "Need", "run", "which"]

_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded now: the child between fork and exec may not load it
# What a helper may print: far more than any document's text, far less than the worker's memory.
MAX_OUTPUT = 64 * 2**20


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: no allocation beyond the call itself.
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


# The guard of a run's folder: deaf to the signals that stop a session or service (it must outlive
# the worker it guards), it waits for end of file on its input, then removes the folder ($1).
_GUARD = 'trap "" HUP INT TERM; read -r _; rm -rf -- "$1"'


@contextlib.contextmanager
def _private_folder() -> Iterator[str]:
    """A new 0700 temporary folder, removed on the way out here or, if this process is killed
    first, by its guard (see the module's docstring)."""
    tmp = tempfile.mkdtemp(prefix="deskdex-helper-")
    try:
        guard: subprocess.Popen[bytes] | None = subprocess.Popen(
            ["/bin/sh", "-c", _GUARD, "deskdex-helper-guard", tmp], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin"},
            start_new_session=True)  # not in the worker's process group: a Ctrl-C there is not for it
    except OSError:  # no /bin/sh: removed here only, when this process lives to do it
        guard = None
    try:
        yield tmp
    finally:
        if guard is not None:  # this process removes it: the guard ends without doing anything
            guard.kill()
            guard.wait()
            if guard.stdin is not None:
                guard.stdin.close()
        shutil.rmtree(tmp, ignore_errors=True)


def run(need: Need, args: Sequence[str], source: Source, *, suffix: str = "",
        timeout: float | None = None, ok_codes: Sequence[int] = (0,)) -> bytes:
    """Run the first program of ``need`` found on PATH with ``args``, where ``{}`` stands for the file
    (``source``'s path, or a private temporary copy of a member's bytes, named with ``suffix``), and
    return what it printed. Raises HelperMissing, TimeLimit, or CorruptFile with the helper's last
    words when it exits with a code not in ``ok_codes``."""
    program = next((p for n in need.names if (p := which(n)) is not None), None)
    if program is None:
        raise HelperMissing(f"{' or '.join(need.names)} is not installed: {need.install}")
    limit = timeout if timeout is not None else current_limits().time_seconds
    with _private_folder() as tmp:
        if source.path is not None and source.data is None:
            path = source.path
        else:
            path = os.path.join(tmp, "member" + suffix)
            with open(path, "wb") as f:
                f.write(source.read())
        argv = [program, *(path if a == "{}" else a for a in args)]
        # LC_ALL: helpers print UTF-8 whatever the daemon's locale; HOME: some (ghostscript) look there.
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8", "HOME": tmp, "TMPDIR": tmp}
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, cwd=tmp, env=env, preexec_fn=_die_with_parent)
        except OSError as exc:
            raise HelperMissing(f"{program} cannot run: {exc.strerror}") from exc
        try:
            out, err = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise TimeLimit(f"{os.path.basename(program)} ran over {limit:g} s") from None
    if len(out) > MAX_OUTPUT:
        out = out[:MAX_OUTPUT]
    if proc.returncode not in ok_codes:
        last = err.decode("utf-8", "replace").strip().splitlines()
        why = last[-1] if last else f"exit status {proc.returncode}"
        raise CorruptFile(f"{os.path.basename(program)}: {why[:300]}")
    return out
