"""Cost of computing who may read each file (index/access.py), which every reconcile pays for
every file in enterprise mode (nothing is converted for it).

    .venv/bin/python benchmarks/access_speed.py [--files 20000] [--accounts 50] [--acl-every 10]

Prints files per second for AccessChecker.readers over a tree of N files in 100-file folders
(every Kth file with an ACL when setfacl exists and we are root), and, for comparison, the cost
of one `getfacl --numeric` process per file measured on 200 files.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from deskdex.index.access import AccessChecker, Principal  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--accounts", type=int, default=50)
    ap.add_argument("--acl-every", type=int, default=10)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="deskdex-access-", dir="/tmp")
    os.chmod(root, 0o755)
    try:
        paths = []
        for i in range(args.files):
            folder = os.path.join(root, f"d{i // 100:04d}")
            os.makedirs(folder, exist_ok=True)
            p = os.path.join(folder, f"f{i}.txt")
            with open(p, "w") as f:
                f.write("x")
            os.chmod(p, (0o600, 0o640, 0o644)[i % 3])
            paths.append(p)
        acls = 0
        if os.geteuid() == 0 and shutil.which("setfacl") and args.acl_every:
            chosen = paths[:: args.acl_every]
            for i in range(0, len(chosen), 500):
                subprocess.run(["setfacl", "-m", "u:60001:r", *chosen[i:i + 500]], check=True)
            acls = len(chosen)
        principals = [Principal(1000 + i, frozenset({1000 + i, 5000 + i % 5})) for i in range(args.accounts)]
        t = time.perf_counter()
        checker = AccessChecker(principals)
        for p in paths:
            checker.readers(p)
        dt = time.perf_counter() - t
        print(f"readers(): {len(paths)} files ({acls} with ACLs), {args.accounts} accounts: {dt:.2f} s, "
              f"{len(paths) / dt:,.0f} files/s, {dt / len(paths) * 1e6:.1f} us/file")
        if shutil.which("getfacl"):
            sample = paths[:200]
            t = time.perf_counter()
            for p in sample:
                subprocess.run(["getfacl", "--numeric", "-p", p], capture_output=True, check=True)
            dt = time.perf_counter() - t
            print(f"getfacl per file (for comparison): {dt / len(sample) * 1e3:.2f} ms/file")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
