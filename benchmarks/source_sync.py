"""Messages per second from an IMAP account, and files per second from an SMB share, against the
same messages and files on disk.

    .venv/bin/python benchmarks/source_sync.py [--messages 2000] [--corpus /tmp/corpora/mixed]
    .venv/bin/python benchmarks/source_sync.py --smb [--files 2000]        (as root: a Samba of its own)

Builds ``--messages`` real messages from the corpus (../shared/corpus/build.sh): each body is the
start of a real text file (of every length the corpus has, cut at 64 KB), and one in five carries
a real attachment (a PDF, DOCX or ODT of under 2 MB). Puts them in a real Dovecot on 127.0.0.1
(tests/imap_server.py, five folders), and the same bytes as .eml files in a folder. Then, each in a
fresh home, with the installed `deskdex`:

- ``source sync``: the account's first sync (no daemon; what a daemon does on its thread);
- ``source sync`` again: nothing changed (one STATUS per folder);
- ``index FOLDER``: the same messages as files, with the default workers and with ``--workers 1``
  (a source is converted by one worker, as the daemon's sync is).

With ``--smb``: ``--files`` documents of the corpus, of every format and length it has (a team's
share), copied into a real Samba share on 127.0.0.1 (tests/smb_server.py, a throwaway account) in
ten folders, synced with ``source sync`` (and again, nothing changed), against ``index`` of the same
folder on disk.

Prints wall seconds, CPU seconds of the command and its children, items per second and the
ratios. Without the corpus, messages are made from generated text (said in the output).
"""

from __future__ import annotations

import argparse
import email.message
import email.utils
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.imap_server import ImapServer, dovecot_missing  # noqa: E402

DESKDEX = str(Path(sys.executable).parent / "deskdex")
FOLDERS = ("INBOX", "Archive", "Work", "Work/Projects", "Lists")
ATTACH_TYPES = {".pdf": "application/pdf", ".odt": "application/vnd.oasis.opendocument.text",
                ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document"}


def messages(n: int, corpus: Path, seed: int = 7) -> tuple[list[bytes], str]:
    rnd = random.Random(seed)
    texts = sorted(corpus.rglob("*.txt")) if corpus.is_dir() else []
    files = sorted(p for p in corpus.rglob("*") if p.suffix in ATTACH_TYPES and p.stat().st_size < 2 << 20) \
        if corpus.is_dir() else []
    what = f"{len(texts)} text files and {len(files)} documents of {corpus}" if texts else "generated text"
    out = []
    for i in range(n):
        msg = email.message.EmailMessage()
        msg["From"] = f"sender{i % 37}@example.org"
        msg["To"] = "alice@example.org"
        msg["Date"] = email.utils.format_datetime(email.utils.localtime())
        msg["Message-ID"] = email.utils.make_msgid(domain="example.org")
        if texts:
            src = rnd.choice(texts)
            body = src.read_bytes()[:64 << 10].decode("utf-8", "replace")
            msg["Subject"] = f"{src.stem} ({i})"
        else:
            body = " ".join(f"word{rnd.randrange(5000)}" for _ in range(rnd.randrange(20, 2000)))
            msg["Subject"] = f"message {i}"
        msg.set_content(body)
        if files and rnd.random() < 0.2:
            f = rnd.choice(files)
            maintype, subtype = ATTACH_TYPES[f.suffix].split("/")
            msg.add_attachment(f.read_bytes(), maintype=maintype, subtype=subtype, filename=f.name)
        out.append(msg.as_bytes(policy=msg.policy.clone(linesep="\r\n")))
    return out, what


def run(args: list[str], home: Path, env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Wall and CPU seconds (the command and its children) of ``deskdex ARGS`` on ``home``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    p = subprocess.run([DESKDEX, *args], env=dict(os.environ, DESKDEX_HOME=str(home), **(env or {})),
                       capture_output=True, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"deskdex {' '.join(args)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu, p.stdout


def table(rows: list[tuple[str, float, float]], count: int, what: str) -> None:
    first = rows[0][1]
    print(f"\n| run | wall s | CPU s | {what}/s | wall vs source sync |\n|---|---:|---:|---:|---:|")
    for name, wall, cpu in rows:
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {count / wall:.0f} | {wall / first:.2f} |")


def share(args: argparse.Namespace) -> int:
    """The SMB half: corpus documents in a Samba share against the same files on disk."""
    from tests.smb_server import SmbServer, samba_missing, unix_account

    if why := samba_missing():
        raise SystemExit(why)
    rnd = random.Random(11)
    files = sorted(p for p in args.corpus.rglob("*") if p.is_file() and not p.is_symlink())
    files = rnd.sample(files, min(args.files, len(files)))
    with tempfile.TemporaryDirectory(prefix="deskdex-bench-") as tmp, unix_account("bench") as account, \
            SmbServer(Path(tmp) / "smb") as srv:
        work = Path(tmp)
        srv.add_user(account.pw_name, "bench-pw")
        for i, f in enumerate(files):
            srv.put(f"team{i % 10}/{i:05d}-{f.name}", f.read_bytes(), owner=account.pw_name)
        size = sum(f.stat().st_size for f in files)
        print(f"{len(files)} files of {args.corpus}, {size / 1e6:.1f} MB, in a Samba share")
        secret = work / "secret"
        secret.write_text("bench-pw\n")
        home = work / "home-smb"
        (home / "config").mkdir(parents=True)
        url = srv.url().rstrip("/").replace("smb://", f"smb://{account.pw_name}@", 1)
        (home / "config" / "config.toml").write_text(
            f"folders = [{json.dumps(str(work / 'empty'))}]\n[[sources]]\nurl = {json.dumps(url)}\n"
            f"password_command = {json.dumps(f'cat {secret}')}\n")
        rows = [("source sync (first)", *run(["source", "sync", "--json"], home)[:2])]
        rows.append(("source sync (nothing changed)", *run(["source", "sync", "--json"], home)[:2]))
        rows.append(("index the same folder on disk", *run(["index", str(srv.path)], work / "home-files")[:2]))
    table(rows, len(files), "files")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--smb", action="store_true", help="the SMB share against local files, not IMAP")
    ap.add_argument("--files", type=int, default=2000, help="with --smb: corpus files in the share")
    ap.add_argument("--corpus", type=Path, default=Path(os.environ.get("DESKDEX_CORPUS", "/tmp/corpora/mixed")))
    args = ap.parse_args()
    if args.smb:
        return share(args)
    if why := dovecot_missing():
        raise SystemExit(why)
    mails, what = messages(args.messages, args.corpus)
    size = sum(map(len, mails))
    print(f"{len(mails)} messages, {size / 1e6:.1f} MB, bodies from {what}")
    with tempfile.TemporaryDirectory(prefix="deskdex-bench-") as tmp:
        work = Path(tmp)
        folder = work / "mail"
        folder.mkdir()
        with ImapServer(work / "imap") as srv:
            t = time.monotonic()
            with srv.session() as m:
                for i, mail in enumerate(mails):
                    name = FOLDERS[i % len(FOLDERS)]
                    if i < len(FOLDERS):
                        m.create(f'"{name}"') if name != "INBOX" else None
                    m.append(f'"{name}"', None, None, mail)
                    (folder / f"{i:06d}.eml").write_bytes(mail)
            print(f"loaded into Dovecot in {time.monotonic() - t:.1f} s")
            secret = work / "secret"
            secret.write_text(srv.password + "\n")
            home = work / "home-imap"
            (home / "config").mkdir(parents=True)
            (home / "config" / "config.toml").write_text(
                f"folders = [{json.dumps(str(work / 'empty'))}]\n[[sources]]\nurl = {json.dumps(srv.url)}\n"
                f"password_command = {json.dumps(f'cat {secret}')}\n")
            rows = [("source sync (first)", *run(["source", "sync", "--json"], home)[:2])]
            rows.append(("source sync (nothing changed)", *run(["source", "sync", "--json"], home)[:2]))
        for workers in (None, 1):
            h = work / f"home-files-{workers}"
            extra = ["--workers", str(workers)] if workers else []
            rows.append((f"index .eml files{' --workers 1' if workers else ''}",
                         *run(["index", str(folder), *extra], h)[:2]))
    table(rows, len(mails), "messages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
