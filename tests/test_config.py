"""Configuration: defaults, validation, and docs that list every variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from vancetope_brain.config import VARIABLES, Config
from vancetope_brain.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent


def test_nothing_set_means_embedded(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = Config.from_env({})
    assert config.embedded and not config.llm_configured
    assert config.broker_url.startswith("memory://")
    assert config.store_url == f"sqlite:///{tmp_path / '.vancetope' / 'vancetope.db'}"


def test_the_data_dir_and_its_paths_are_absolute_from_the_start_folder(tmp_path, monkeypatch):
    # Flask's send_file reads a relative path against the package's folder, not the
    # folder the server started in (issue 27 item 5).
    monkeypatch.chdir(tmp_path)
    config = Config.from_env({"VANCETOPE_DATA_DIR": "data/../here"})
    monkeypatch.chdir("/")
    assert config.data_dir == tmp_path / "here"
    assert config.attachments_dir == tmp_path / "here" / "attachments"
    assert config.store_url == f"sqlite:///{tmp_path / 'here' / 'vancetope.db'}"
    assert Config.from_env({"VANCETOPE_ATTACHMENTS_DIR": "files"}).attachments_dir == \
        Path("/files")


def test_redis_url_becomes_the_broker():
    config = Config.from_env({"VANCETOPE_REDIS_URL": "redis://r:6379/0"})
    assert not config.embedded and config.broker_url == "redis://r:6379/0"


@pytest.mark.parametrize(("name", "value"), [("VANCETOPE_LANE_SHARDS", "zero"),
                                              ("VANCETOPE_LANE_SHARDS", "0"),
                                              ("VANCETOPE_LEASE_TTL", "0.01")])
def test_bad_values_name_the_variable(name, value):
    with pytest.raises(ConfigError, match=name):
        Config.from_env({name: value})


@pytest.mark.parametrize("doc", ["README.md", "docs/configuration.md"])
def test_docs_list_every_variable(doc):
    text = (ROOT / doc).read_text()
    missing = [name for name in VARIABLES if f"`{name}`" not in text]
    assert missing == []
