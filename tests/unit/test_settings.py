"""One settings model for both processes: defaults, errors naming the
variable, and every variable documented in the README's table."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from settings import Settings, SettingsError, environment_names, load_settings
from tests.unit.own_process import run_apart

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def test_defaults_without_environment(monkeypatch):
    for name in environment_names().values():
        monkeypatch.delenv(name, raising=False)
    settings = load_settings()
    assert settings.redis_url == "redis://127.0.0.1:6379/0" and settings.max_concurrent == 16
    assert settings.loaded_marker_seconds == 300 and settings.log_prompts is False


def test_values_are_read_from_their_variables_and_empty_means_unset(monkeypatch):
    monkeypatch.setenv("SWITCHBOARD_MAX_QUEUE", "7")
    monkeypatch.setenv("SWITCHBOARD_LOG_PROMPTS", "yes")
    monkeypatch.setenv("SWITCHBOARD_KEEPALIVE", "")
    monkeypatch.setenv("SWITCHBOARD_MODELS", "/tmp/models.toml")
    settings = load_settings()
    assert (settings.max_queue, settings.log_prompts, settings.keepalive_seconds) == (7, True, 10.0)
    assert settings.models_path == Path("/tmp/models.toml")


def test_overrides_win_and_unknown_ones_are_refused(monkeypatch):
    monkeypatch.setenv("SWITCHBOARD_MAX_QUEUE", "7")
    assert load_settings({"max_queue": 3}).max_queue == 3
    with pytest.raises(SettingsError, match=r"unknown settings: \['max_qeue'\]"):
        load_settings({"max_qeue": 3})


@pytest.mark.parametrize("variable, value, message", [
    ("SWITCHBOARD_MAX_CONCURRENT", "abc", "SWITCHBOARD_MAX_CONCURRENT: Input should be a valid integer"),
    ("SWITCHBOARD_EVENT_TIMEOUT", "-1", "SWITCHBOARD_EVENT_TIMEOUT: Input should be greater than 0"),
    ("SWITCHBOARD_LOG_PROMPTS", "maybe", "SWITCHBOARD_LOG_PROMPTS: Input should be a valid boolean"),
], ids=["int", "positive", "bool"])
def test_a_bad_value_names_its_variable(monkeypatch, variable, value, message):
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as raised:
        load_settings()
    assert message in str(raised.value) and repr(value) in str(raised.value)


def test_every_setting_is_in_the_readmes_configuration_table():
    table = README.read_text().split("## Configuration", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", table))
    missing = sorted(set(environment_names().values()) - documented)
    assert not missing, f"add these to the README's configuration table: {missing}"


def test_settings_are_frozen():
    with pytest.raises(Exception):
        Settings().max_queue = 1  # type: ignore[misc]


def _gunicorn_master(**environment: str) -> dict:
    """What gunicorn's master makes of its configuration file, in a process of its own."""
    return run_apart("import json, runpy, sys; config = runpy.run_path('gunicorn.conf.py')\n"
                     "print(json.dumps({'grace': config['graceful_timeout'], 'pydantic': 'pydantic' in sys.modules}))",
                     {**os.environ, **environment})


def test_gunicorns_master_reads_the_grace_period_without_holding_the_settings_model():
    """The master only supervises: pydantic's 14 MB stay in the web process it forks."""
    assert _gunicorn_master(SWITCHBOARD_GRACEFUL_TIMEOUT="7") == {"grace": 7, "pydantic": False}
    assert _gunicorn_master() == {"grace": Settings().graceful_timeout_seconds, "pydantic": False}


@pytest.mark.parametrize("variable, value", [("SWITCHBOARD_GRACEFUL_TIMEOUT", "0"),
                                             ("SWITCHBOARD_MAX_CONCURRENT", "many")])
def test_a_bad_value_stops_the_web_servers_start_naming_its_variable(variable, value):
    gunicorn = Path(sys.executable).parent / "gunicorn"
    stopped = subprocess.run([str(gunicorn), "-b", "127.0.0.1:0", "app:create_app()"], cwd=ROOT,  # as the Procfile
                             env={**os.environ, variable: value}, capture_output=True, text=True, timeout=60)
    assert stopped.returncode != 0 and f"{variable}: Input should be" in stopped.stderr
