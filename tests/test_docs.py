"""The settings table and the docs agree (datasette's tests/test_docs.py does the same), and so do the
protocol module and docs/protocol.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from deskdex import protocol
from deskdex.errors import ConfigError
from deskdex.paths import Home
from deskdex.settings import SETTINGS, load

DOCS = Path(__file__).resolve().parent.parent / "docs"
TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", dict: "table"}


def documented_settings() -> dict[str, tuple[str, str, str]]:
    """name -> (type, default, allowed) from the table in docs/configuration.md."""
    rows = {}
    for line in (DOCS / "configuration.md").read_text().splitlines():
        m = re.match(r"\| `([\w.]+)` \| ([\w ]+) \| `(.*?)` \| ((?:[^|\\]|\\.)*?) \|", line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3), m.group(4).replace("\\|", "|"))
    return rows


def toml_value(value: object) -> str:
    import tomli_w

    if value == {}:
        return "{}"  # tomli_w writes an empty table as a [x] header, not as a value
    return tomli_w.dumps({"x": value}).split(" = ", 1)[1].strip()


def test_every_setting_is_documented_with_its_type_default_and_bounds():
    documented = documented_settings()
    assert set(documented) == {s.name for s in SETTINGS}
    for s in SETTINGS:
        kind = f"{TYPES[s.kind] if s.kind is dict else 'list'} of {TYPES.get(s.items, 'table')}s" \
            if s.kind in (list, dict) else TYPES[s.kind]
        assert documented[s.name] == (kind, toml_value(s.default), s.allowed), s.name


def test_unknown_setting_and_wrong_type_are_named(tmp_path):
    home = Home.resolve(str(tmp_path)).ensure()
    for text, name in (('foldrs = ["x"]\n', "foldrs"), ('workers = "many"\n', "workers"),
                       ("workers = true\n", "workers"), ("folders = [1]\n", "folders"),
                       ("[crawl]\ndelay = \"slow\"\n", "crawl.delay"), ("[crawl]\nspeed = 1\n", "crawl.speed"),
                       ("crawl = 3\n", "crawl")):
        Path(home.config_file).write_text(text)
        with pytest.raises(ConfigError, match=re.escape(name)):
            load(home)
    Path(home.config_file).write_text('folders = ["~/x"]\nworkers = 3\ntime_limit = 5\n[crawl]\ndelay = 2\n')
    cfg = load(home)
    assert cfg.settings.workers == 3 and cfg.folders() == [str(Path("~/x").expanduser())]
    assert cfg.settings.time_limit == 5.0 and isinstance(cfg.settings.time_limit, float) and cfg.settings.crawl.delay == 2.0


def test_protocol_md_lists_exactly_the_ops_and_codes():
    text = (DOCS / "protocol.md").read_text()
    ops = set(re.findall(r"^### `(\w+)`", text, re.M))
    assert ops == set(protocol.OPS)
    codes = set(re.findall(r"^\| `(\w+)` \|", text.split("## Error codes", 1)[1], re.M))
    assert codes == set(protocol.ERRORS)
    for name, op in protocol.OPS.items():  # each op's arguments, with their types
        section = text.split(f"### `{name}`", 1)[1].split("\n### ", 1)[0]
        for arg in op.args.values():
            assert f"`{arg.name}`" in section and arg.type_name() in section, (name, arg.name)
