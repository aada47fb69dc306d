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

import ctypes
import os
import subprocess
import sys
import time

INTERVAL = 0.05


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                children.setdefault(_parent(int(name)), []).append(int(name))
            except (OSError, IndexError, ValueError):
                pass
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def pss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphaned workers stay in the tree
    proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
    names: dict[int, str] = {}
    own: dict[str, float] = {}
    cpu: dict[int, float] = {}
    peak: tuple[float, dict[str, float]] = (0.0, {})
    started = time.monotonic()
    while proc.poll() is None:
        now: dict[str, float] = {}
        for pid in descendants(os.getpid()):
            if pid not in names:
                try:
                    with open(f"/proc/{pid}/cmdline") as f:
                        forkserver = "forkserver" in f.read()
                    parent = _parent(pid)
                except (OSError, IndexError, ValueError):
                    continue
                names[pid] = ("main" if pid == proc.pid else
                              "fork server" if forkserver and parent == proc.pid else f"worker {pid}")
            now[names[pid]] = pss_mib(pid)
            cpu[pid] = cpu_seconds(pid) or cpu.get(pid, 0.0)
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
    main_cpu = cpu.get(proc.pid, 0.0)
    print(f"CPU: main {main_cpu:.2f} s, the other processes {sum(cpu.values()) - main_cpu:.2f} s")
    print("each process's own peak (MiB): " + ", ".join(f"{n} {m:.0f}" for n, m in
                                                        sorted(own.items(), key=lambda kv: -kv[1])[:8]))


if __name__ == "__main__":
    main()
