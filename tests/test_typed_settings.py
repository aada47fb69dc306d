"""The typed settings (issue 29): ``Config.settings`` is generated from the one settings table
(core/typed_settings.py, by tests/settings_codegen.py) and cannot drift from it; every value in
it has the type the table gives and lies within its bounds (a value that does not is one
ConfigError naming the setting); mypy sees the type of each read; and the package reads no
setting through the untyped ``cfg["name"]``. Real files on disk and a real mypy run."""

from __future__ import annotations

import ast
import dataclasses
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from deskdex import settings
from deskdex.errors import ConfigError
from deskdex.paths import Home

from .conftest import ROOT

PYTHON_TYPES = {bool: bool, int: int, float: float, str: str, list: tuple, dict: dict}


def home(tmp_path: Path, text: str = "") -> Home:
    h = Home.resolve(str(tmp_path / "home")).ensure()
    Path(h.config_file).write_text(text)
    return h


def read_of(obj: settings.Settings, name: str) -> Any:
    """``cfg.settings.crawl.delay`` for ``crawl.delay``."""
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def test_the_typed_module_is_what_the_table_generates(monkeypatch):
    from . import settings_codegen

    text = settings_codegen.TARGET.read_text()
    assert text == settings_codegen.source(), \
        "core/typed_settings.py differs from the settings table: run .venv/bin/python -m tests.settings_codegen"
    # A change to the table (here a default) is a change to the source, so the check above would see it.
    changed = tuple(dataclasses.replace(s, default=3) if s.name == "workers" else s for s in settings.SETTINGS)
    monkeypatch.setattr(settings_codegen, "SETTINGS", changed)
    assert settings_codegen.source() != text and "    workers: int = 3\n" in settings_codegen.source()


def test_every_setting_is_one_typed_attribute_with_its_default():
    defaults = settings.Settings()
    names = set()
    for f in dataclasses.fields(defaults):
        if f.name in settings.TABLES:
            names |= {f"{f.name}.{g.name}" for g in dataclasses.fields(getattr(defaults, f.name))}
        else:
            names.add(f.name)
    assert names == set(settings.BY_NAME)  # no setting without an attribute, no attribute without a setting
    for s in settings.SETTINGS:
        value = read_of(defaults, s.name)
        assert isinstance(value, PYTHON_TYPES[s.kind]) and not (isinstance(value, bool) and s.kind is not bool), s.name
        assert value == (tuple(s.default) if s.kind is list else s.default), s.name
    assert settings.typed(settings.DEFAULTS) == defaults


def test_a_config_file_reads_as_typed_values(tmp_path):
    h = home(tmp_path, 'exclude = ["*.log"]\ntime_limit = 5\nconverters = {"text/x-a" = "m:f"}\n'
                       '[crawl]\ndelay = 2\n[[crawl.sites]]\nurl = "https://example.org/"\nmax_pages = 3\n'
                       '[ocr]\nlanguages = ["deu"]\n')
    cfg = settings.load(h)
    s = cfg.settings
    assert s.time_limit == 5.0 and isinstance(s.time_limit, float)  # an integer where a number is wanted
    assert s.crawl.delay == 2.0 and isinstance(s.crawl.delay, float)
    assert s.exclude == ("*.log",) and s.ocr.languages == ("deu",) and s.workers == 2
    assert s.crawl.sites == ({"url": "https://example.org/", "max_pages": 3},)
    assert dict(s.converters) == {"text/x-a": "m:f"}
    # Shared by a daemon's threads: a change is a new Config, never an edit in place.
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.workers = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.converters["text/x-b"] = "m:g"  # type: ignore[index]
    # The untyped read is gone: every read goes through the typed object.
    with pytest.raises(TypeError):
        cfg["exclude"]  # type: ignore[index]
    again = cfg.given_over({**cfg.values, "exclude": ["*.tmp"]})
    assert again.settings.exclude == ("*.tmp",) and cfg.settings.exclude == ("*.log",)
    # A list taken from the typed API (a tuple) and given back is the list the file holds.
    same = cfg.given_over({**cfg.values, "exclude": cfg.settings.exclude})
    assert same == cfg and same.values["exclude"] == ["*.log"] and same.settings == cfg.settings


@pytest.mark.parametrize("name, value, message", [
    ("workers", "many", "workers must be an integer, not 'many'"),
    ("workers", True, "workers must be an integer, not True"),
    ("workers", 0, "workers must be from 1 to 256, not 0"),
    ("crawl.delay", -1, "crawl.delay must be from 0 to 3600, not -1"),
    ("exclude", "*.log", "exclude must be a list of strings, not '*.log'"),
    ("broker", "http://x", "broker must be empty, or a redis:// or rediss:// URL with a host, not 'http://x'"),
    ("ocr.enabled", "yes", "ocr.enabled must be a boolean, not 'yes'"),
])
def test_a_value_that_does_not_fit_is_one_error_naming_the_setting(tmp_path, name, value, message):
    h = home(tmp_path)
    with pytest.raises(ConfigError) as made:
        settings.Config({**settings.DEFAULTS, name: value}, h)
    assert str(made.value).startswith(message), made.value
    # The same value in config.toml: the commands refuse it with the file's path and the same words...
    table, _, key = name.rpartition(".")
    import tomli_w

    Path(h.config_file).write_text(tomli_w.dumps({table: {key: value}} if table else {name: value}))
    with pytest.raises(ConfigError) as read:
        settings.load(h)
    assert str(read.value).startswith(f"{h.config_file}: {message}"), read.value
    # ... and a lenient read (the daemon's) keeps the default, typed.
    problems: list[str] = []
    cfg = settings.load(h, problems)
    assert read_of(cfg.settings, name) == read_of(settings.Settings(), name)
    assert len(problems) == 1 and message in problems[0], problems


def test_the_broker_given_on_the_command_line_is_checked_like_the_setting(tmp_path):
    from deskdex.clients.managing import _with_given

    cfg = settings.load(home(tmp_path))
    assert _with_given(cfg, {"broker": "redis://127.0.0.1:6399/0"}).settings.broker == "redis://127.0.0.1:6399/0"
    with pytest.raises(ConfigError, match=re.escape("broker must be empty, or a redis:// or rediss:// URL")):
        _with_given(cfg, {"broker": "127.0.0.1:6379"})
    assert _with_given(cfg, {"web": "127.0.0.1:0"}).settings.web == "127.0.0.1:0"
    with pytest.raises(ConfigError, match="web"):
        _with_given(cfg, {"web": "localhost"})


@pytest.mark.slow
def test_mypy_sees_the_type_of_each_read(tmp_path):
    """Through ``cfg["workers"]`` mypy saw ``Any``; through the typed API, the type, so a wrong use fails."""
    (tmp_path / "reads.py").write_text(
        "from deskdex.settings import Config\n\n\n"
        "def f(cfg: Config) -> None:\n"
        "    reveal_type(cfg.settings.workers)\n"
        "    reveal_type(cfg.settings.crawl.delay)\n"
        "    reveal_type(cfg.settings.exclude)\n"
        "    reveal_type(cfg.settings.crawl.sites[0]['url'])\n"
        "    name: str = cfg.settings.time_limit\n")
    p = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
                        "--no-error-summary", "reads.py"], cwd=tmp_path, capture_output=True, text=True, timeout=240)
    revealed = [t.replace("builtins.", "") for t in re.findall(r'Revealed type is "([^"]+)"', p.stdout)]
    assert revealed == ["int", "float", "tuple[str, ...]", "str"], p.stdout
    assert 'Incompatible types in assignment (expression has type "float", variable has type "str")' in p.stdout


def untyped_reads() -> list[str]:
    """``cfg["name"]`` / ``config["name"]`` reads in the package's source: file:line name."""
    found = []
    for folder in ("core", "clients", "cluster", "converters", "daemon", "index", "pipeline", "sources", "webcrawl"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                        and node.slice.value in settings.BY_NAME and _is_config(node.value):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.slice.value}")
    return found


def _is_config(node: ast.expr) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    # The names a Config goes by in the package (configwatch.apply's ``old`` and ``new`` too).
    names = ("cfg", "config", "crawl_cfg", "new", "old")
    return name in names or (isinstance(node, ast.Call) and _loads_settings(node))


def _loads_settings(call: ast.Call) -> bool:
    """``settings.load(home)["exclude"]``, ``crawlconfig.load(path)["delay"]``, ``load_leniently(home)[...]``."""
    f = call.func
    return (isinstance(f, ast.Attribute) and f.attr == "load" and isinstance(f.value, ast.Name)
            and f.value.id in ("settings", "crawlconfig")) or (isinstance(f, ast.Name) and f.id == "load_leniently")


def test_the_package_reads_settings_only_through_the_typed_api():
    left = untyped_reads()
    assert not left, "untyped settings reads (use cfg.settings.NAME):\n" + "\n".join(left)
