"""Which processes of a command's tree hold its memory and spend its CPU, sampled every 50 ms.

    .venv/bin/python benchmarks/process_tree.py .venv/bin/deskdex --home H index FOLDER

Prints the tree's peak PSS with each process's share at that moment (``main``: the command, with
the writer; ``fork server``; ``worker PID``: the converter workers it forked), each process's own
peak, and the CPU (user + system) of the main process against that of all the others. The CPU of a
process is read at its last sample, so a worker's last 50 ms may be missed. ../shared/tools/peak_pss.py
gives the tree's peak alone; this says which processes make it (issue 33: the peak is a worker
converting a big file while the writer stores another's text; on small notes the main process is
busy the whole run).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from recoll_proc import _become_subreaper, _children, cpu, pss_kib, tree  # noqa: E402

INTERVAL = 0.05


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    _become_subreaper()  # a fork server whose parent has exited stays in the tree
    proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
    names: dict[int, str] = {}
    own: dict[str, float] = {}
    used: dict[int, float] = {}  # each process's own CPU at its last sample
    peak: tuple[float, dict[str, float]] = (0.0, {})
    started = time.monotonic()
    while proc.poll() is None:
        now: dict[str, float] = {}
        main_children = set(_children().get(proc.pid, ()))
        for pid in tree(os.getpid())[1:]:
            if pid not in names:
                try:
                    with open(f"/proc/{pid}/cmdline") as f:
                        forkserver = "forkserver" in f.read()
                except OSError:
                    continue
                names[pid] = ("main" if pid == proc.pid else
                              "fork server" if forkserver and pid in main_children else f"worker {pid}")
            now[names[pid]] = pss_kib(pid) / 1024
            used[pid] = cpu(pid, reaped=False) or used.get(pid, 0.0)
        for name, mib in now.items():
            own[name] = max(own.get(name, 0.0), mib)
        if sum(now.values()) > peak[0]:
            peak = (sum(now.values()), now)
        time.sleep(INTERVAL)
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    print(f"wall {time.monotonic() - started:.2f} s, exit {proc.returncode}")
    print(f"tree peak {peak[0]:.0f} MiB: " + ", ".join(f"{n} {m:.0f}" for n, m in
                                                      sorted(peak[1].items(), key=lambda kv: -kv[1]) if m >= 1))
    main_cpu = used.get(proc.pid, 0.0)
    print(f"CPU: main {main_cpu:.2f} s, the other processes {sum(used.values()) - main_cpu:.2f} s")
    print("each process's own peak (MiB): " + ", ".join(f"{n} {m:.0f}" for n, m in
                                                        sorted(own.items(), key=lambda kv: -kv[1])[:8]))


if __name__ == "__main__":
    main()
