"""The settings table and the docs agree (datasette's tests/test_docs.py does the same)."""

from pathlib import Path

import pytest

from daemon.config import SETTINGS, ConfigError, load
from daemon.paths import Home

DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.mark.parametrize("setting", [s.name for s in SETTINGS])
def test_every_setting_is_documented(setting):
    assert f"| `{setting}` |" in (DOCS / "configuration.md").read_text()


def test_unknown_setting_and_wrong_type_are_named(tmp_path):
    home = Home.resolve(str(tmp_path)).ensure()
    Path(home.config_file).write_text('foldrs = ["x"]\n')
    with pytest.raises(ConfigError, match="foldrs"):
        load(home)
    Path(home.config_file).write_text('workers = "many"\n')
    with pytest.raises(ConfigError, match="workers"):
        load(home)
    Path(home.config_file).write_text('folders = ["~/x"]\nworkers = 3\n')
    cfg = load(home)
    assert cfg["workers"] == 3 and cfg.folders() == [str(Path("~/x").expanduser())]
