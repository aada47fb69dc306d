"""Hostile input: each file ends as a recorded error of that file or member, quickly, within the
limits, without writing anything to disk or following a link, and the rest still converts.

Every file is generated here. Each is run in this process (``convert``) and all of them together
through ``WorkerPool``, beside a converter that loops and one that eats memory."""

from __future__ import annotations

import dataclasses
import gzip
import io
import os
import subprocess
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from deskdex.converters import Limits, Source, convert
from deskdex.converters.convert import Outcome
from deskdex.converters.isolation import WorkerPool

from .misbehaving import OVERRIDES, measured_time_limit

SMALL = Limits(member_bytes=8 * 2**20, time_seconds=20.0)


def snapshot(*dirs: Path) -> set[str]:
    return {os.path.join(root, f) for d in dirs for root, _, files in os.walk(d) for f in files}


def run(path: Path, limits: Limits = SMALL, cpu_seconds: float = 10.0) -> dict[str, Outcome]:
    """Convert, check that nothing was written and no converter bug happened, return by URI.

    "Quickly" is counted in CPU seconds, what the file costs: the wall clock also counts whatever
    else the machine runs, and a busy machine must not fail the test."""
    before = snapshot(path.parent, Path.cwd())
    start = time.process_time()
    outcomes = convert(Source.from_path(path), limits=limits)
    took = time.process_time() - start
    assert took < cpu_seconds, f"a hostile file must be refused quickly: {took:.2f} CPU s"
    assert snapshot(path.parent, Path.cwd()) == before, "conversion wrote files"
    bugs = [o for o in outcomes if o.reason == "converter_bug"]
    assert not bugs, bugs
    return {o.uri: o for o in outcomes}


def zip_bomb(path: Path) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("fine.txt", "a harmless neighbour file")
        with z.open("zeros.txt", "w") as f:  # 40 MiB of zeros: about 40 KiB compressed
            for _ in range(40):
                f.write(bytes(2**20))
    return path


@pytest.mark.slow
def test_zip_bomb_stops_at_the_member_limit_and_the_ratio(tmp_path: Path) -> None:
    p = zip_bomb(tmp_path / "bomb.zip")
    base = Source.from_path(p).uri
    out = run(p)  # the declared size (40 MiB) is over member_bytes (8 MiB)
    assert out[base + "#zeros.txt"].reason == "too_large"
    assert out[base + "#fine.txt"].ok and out[base].ok
    # With a member limit above it, the expansion ratio stops the reading.
    out = run(p, Limits(member_bytes=100 * 2**20))
    assert out[base + "#zeros.txt"].reason == "hostile"
    assert "bomb" in out[base + "#zeros.txt"].message
    assert out[base + "#fine.txt"].ok


def test_zip_member_lying_about_its_size(tmp_path: Path) -> None:
    p = zip_bomb(tmp_path / "liar.zip")
    data = bytearray(p.read_bytes())
    with zipfile.ZipFile(p) as z:
        info = z.getinfo("zeros.txt")
    # Declare 1000 bytes in the central directory and the local header: reading must not trust it.
    small = (1000).to_bytes(4, "little")
    central = data.rfind(b"PK\x01\x02")
    data[central + 24:central + 28] = small
    data[info.header_offset + 22:info.header_offset + 26] = small
    p.write_bytes(bytes(data))
    out = run(p)
    member = out[Source.from_path(p).uri + "#zeros.txt"]
    assert not member.ok and member.reason in ("corrupt", "hostile", "too_large")


def gzip_bomb(path: Path) -> Path:
    with gzip.open(path, "wb", compresslevel=9) as f:  # 200 MiB of zeros in about 200 KiB
        for _ in range(200):
            f.write(bytes(2**20))
    return path


@pytest.mark.slow
def test_gzip_bomb(tmp_path: Path) -> None:
    p = gzip_bomb(tmp_path / "server.log.gz")
    out = run(p, Limits())
    # A compressed single file is one document: the bomb is that file's own failure.
    assert list(out) == [Source.from_path(p).uri]
    failed = out[Source.from_path(p).uri]
    assert failed.reason == "hostile" and "bomb" in failed.message


def nested_zip(path: Path, depth: int) -> Path:
    data = b"the treasure at the bottom"
    name = "treasure.txt"
    for level in range(depth):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr(name, data)
        data, name = buf.getvalue(), f"level{level}.zip"
    path.write_bytes(data)
    return path


def test_archive_nested_fifty_deep(tmp_path: Path) -> None:
    p = nested_zip(tmp_path / "nested.zip", 50)
    out = run(p, Limits())
    hostile = [o for o in out.values() if o.reason == "hostile"]
    assert len(hostile) == 1 and "nested" in hostile[0].message
    assert hostile[0].uri.count("#") == Limits().depth + 1
    assert sum(o.ok for o in out.values()) == Limits().depth + 1
    assert not any("treasure" in (o.document.text() if o.ok else "") for o in out.values())


def test_path_traversal_and_absolute_names_stay_inside(tmp_path: Path) -> None:
    names = ["../../escaped.txt", "/etc/absolute.txt", "C:\\windows\\drive.txt", "./ok/../../dots.txt"]
    z = tmp_path / "sneaky.zip"
    with zipfile.ZipFile(z, "w") as zf:
        for n in names:
            zf.writestr(n, f"words of {n}")
    t = tmp_path / "sneaky.tar"
    t.write_bytes(_tar({n: f"words of {n}".encode() for n in names}))
    for p in (z, t):
        out = run(p)
        base = Source.from_path(p).uri
        inner = sorted(u[len(base) + 1:] for u in out if u != base)
        assert inner == ["escaped.txt", "etc/absolute.txt", "ok/dots.txt", "windows/drive.txt"], inner
        assert all(o.ok for o in out.values())
    assert not (tmp_path.parent / "escaped.txt").exists()


def _tar(files: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT, errors="surrogateescape") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE if not name.startswith("hard") else tarfile.LNKTYPE
            info.linkname = target
            tf.addfile(info)
    return buf.getvalue()


def test_symlink_members_are_skipped(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRETWORD")
    t = tmp_path / "links.tar"
    t.write_bytes(_tar({"real.txt": b"real words"}, {"link.txt": str(secret), "hard.txt": str(secret)}))
    z = tmp_path / "links.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("real.txt", "real words")
        info = zipfile.ZipInfo("link.txt")
        info.external_attr = 0o120777 << 16
        zf.writestr(info, str(secret))
    for p in (t, z):
        out = run(p)
        base = Source.from_path(p).uri
        assert set(out) == {base, base + "#real.txt"}
        assert all("TOPSECRETWORD" not in o.document.text() for o in out.values() if o.ok)


@pytest.mark.slow
def test_invalid_utf8_names_and_content(tmp_path: Path) -> None:
    bad_name = b"caf\xe9-\xff.txt".decode("utf-8", "surrogateescape")
    t = tmp_path / "latin.tar"
    t.write_bytes(_tar({bad_name: b"bytes \xff\xfe\xfa not utf-8 \xc3", "good.txt": b"good words"}))
    out = run(t)
    base = Source.from_path(t).uri
    assert base + "#caf%EF%BF%BD-%EF%BF%BD.txt" in out  # replacement characters, valid UTF-8
    assert out[base + "#good.txt"].ok
    # A ZIP whose names claim UTF-8 (flag 0x800) but are not: the whole ZIP is a recorded error.
    z = tmp_path / "liar.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("caf\u00e9.txt", "words")
    z.write_bytes(z.read_bytes().replace("café".encode(), b"caf\xff\xfe"))
    out = run(z)
    assert out[Source.from_path(z).uri].reason == "corrupt"
    # Markup and mail with invalid bytes still convert.
    for name, data in (("bad.md", b"# Title \xff\n\nbody \xfe words"),
                       ("bad.eml", b"Subject: caf\xe9 \xff\nFrom: x@y\n\nbody \xff words\n"),
                       ("bad.xml", b"<?xml version='1.0' encoding='utf-8'?><r>caf\xe9 \xff words</r>")):
        (tmp_path / name).write_bytes(data)
        o = run(tmp_path / name)[Source.from_path(tmp_path / name).uri]
        assert o.ok or o.reason == "corrupt", o


def sparse_log(path: Path) -> Path:
    subprocess.run(["truncate", "-s", "2G", str(path)], check=True)
    return path


def test_two_gigabyte_log_is_refused_by_size(tmp_path: Path) -> None:
    p = sparse_log(tmp_path / "huge.log")
    out = run(p, Limits())
    assert out[Source.from_path(p).uri].reason == "too_large"


def _laughs() -> bytes:
    lines = ['<?xml version="1.0"?>', "<!DOCTYPE lolz [", ' <!ENTITY lol "lol">']
    for i in range(1, 10):
        ref = "&lol;" if i == 1 else f"&lol{i - 1};"
        lines.append(f' <!ENTITY lol{i} "{ref * 10}">')  # 10**9 "lol"s once expanded
    return "\n".join([*lines, "]>", "<lolz>&lol9;</lolz>", ""]).encode()


BILLION_LAUGHS = _laughs()


def billion_laughs(path: Path) -> Path:
    path.write_bytes(BILLION_LAUGHS)
    return path


def test_billion_laughs(tmp_path: Path) -> None:
    p = billion_laughs(tmp_path / "lolz.xml")
    out = run(p, Limits(), cpu_seconds=1.0)  # refused at the first expansions, not after 10**9
    o = out[Source.from_path(p).uri]
    assert o.reason == "hostile" and "expan" in o.message
    # The same inside an archive costs only that member.
    z = tmp_path / "lolz.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("lolz.xml", BILLION_LAUGHS)
        zf.writestr("fine.txt", "fine words")
    out = run(z)
    assert out[Source.from_path(z).uri + "#lolz.xml"].reason == "hostile"
    assert out[Source.from_path(z).uri + "#fine.txt"].ok


@pytest.mark.slow
def test_worker_pool_survives_every_hostile_file(tmp_path: Path) -> None:
    files = [zip_bomb(tmp_path / "bomb.zip"), gzip_bomb(tmp_path / "bomb.log.gz"),
             nested_zip(tmp_path / "nested.zip", 50), sparse_log(tmp_path / "huge.log"),
             billion_laughs(tmp_path / "lolz.xml")]
    for name in ("loop.txt", "hog.txt", "good1.txt", "good2.md"):
        (tmp_path / name).write_text(f"# Good\n\ncontent of {name} in plain words")
        files.append(tmp_path / name)
    limits = Limits(memory_bytes=512 * 2**20, member_bytes=8 * 2**20)

    def check(results: dict[str, list[Outcome]]) -> None:
        reasons = {name: out[0].reason for name, out in results.items()}
        assert reasons["hog.txt"] in ("memory", "crash") and "memory" in results["hog.txt"][0].message, \
            results["hog.txt"]
        assert reasons["huge.log"] == "too_large" and reasons["lolz.xml"] == "hostile"
        assert any(o.reason == "too_large" for o in results["bomb.zip"])
        assert [o.reason for o in results["bomb.log.gz"]] in (["hostile"], ["too_large"])
        assert any(o.reason == "hostile" for o in results["nested.zip"])
        assert "content of good1.txt" in results["good1.txt"][0].document.text()  # type: ignore[union-attr]
        assert results["good2.md"][0].document.title == "Good"  # type: ignore[union-attr]

    before = snapshot(tmp_path)
    # The time limit is derived from what every file but the loop needs here and now.
    ending = [f for f in files if f.name != "loop.txt"]
    limit, first = measured_time_limit(ending, limits, workers=2, floor=3.0)
    assert set(first) == {f.name for f in ending}
    check(first)
    # Normal priority: at idle priority a loaded test machine could starve the workers.
    with WorkerPool(2, dataclasses.replace(limits, time_seconds=limit), idle=False, overrides=OVERRIDES) as pool:
        results = {s.name: outcomes for s, outcomes in pool.map(Source.from_path(f) for f in files)}
    assert snapshot(tmp_path) == before
    assert set(results) == {f.name for f in files}
    check(results)
    assert results["loop.txt"][0].reason == "timeout", results["loop.txt"]
