"""Properties 9 and 11: a minted key never exceeds its policy, checked as
the sets of models served (not as strings), at mint time and at every use;
and the keys file cannot silently widen access: a group table inherits what
it does not set, and a field the file does not know stops start-up (or a
reload) naming it."""
from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from identity.keys import load_keys, read_signin_policy
from scripts.processes import stack_env, start_web
from tests.security.office import apply_keys, chat, keys_text, signed_in


@pytest.mark.parametrize("asked", [["ech*"], ["*"], ["e*"], ["[e]cho*"], ["echo:*"], ["echo", "echo?slow"],
                                   ["*o*"]])
def test_a_key_may_not_ask_for_more_than_its_policy_serves(office, asked):
    apply_keys(office, keys_text(signin='models = ["ech?"]\n'))
    bob = signed_in(office["front"], "bob")
    assert bob.request("POST", "/me/keys", json={"label": "narrow", "models": ["echo"]}).status_code == 201
    refused = bob.request("POST", "/me/keys", json={"label": "wide", "models": asked})
    assert refused.status_code == 400 and "models" in refused.text


def test_a_key_minted_for_a_pattern_reaches_only_what_its_policy_serves(office):
    apply_keys(office, keys_text(signin='models = ["echo*"]\n'))
    bob = signed_in(office["front"], "bob")
    key = bob.request("POST", "/me/keys", json={"label": "k", "models": ["echo:*"]}).json()["key"]
    assert chat(office["front"], key, "echo:slow").status_code == 200
    apply_keys(office, keys_text(signin='models = ["echo"]\n'))  # narrowed after it was made
    assert chat(office["front"], key, "echo:slow").status_code == 404
    assert chat(office["front"], key, "echo").status_code == 404  # (it asked for echo:* only)


def test_a_group_table_inherits_what_it_does_not_set(tmp_path: Path):
    keys_file = tmp_path / "keys.toml"
    keys_file.write_text('[signin]\nmodels = ["office-coder"]\nmcp_servers = ["time"]\nrequests_per_minute = 30\n'
                         'daily_tokens = 1000\nmax_concurrent = 1\n\n[signin.groups.ml-team]\nmodels = ["*"]\n\n'
                         '[signin.groups.tight]\nrequests_per_minute = 5\nmcp_servers = []\n')
    policy = read_signin_policy(keys_file)
    wide, tight = policy.template(("ml-team",)), policy.template(("tight",))
    assert wide.models == ("*",) and wide.mcp_servers == ("time",) and wide.requests_per_minute == 30
    assert wide.daily_tokens == 1000 and wide.max_concurrent == 1
    assert tight.models == ("office-coder",) and tight.mcp_servers == () and tight.requests_per_minute == 5


@pytest.mark.parametrize("text,field", [
    ('[keys.a]\nsha256 = "{d}"\nmodel = ["echo"]\n', "model"),
    ('[keys.a]\nsha256 = "{d}"\nadmn = true\n', "admn"),
    ('[signin]\nmcp_server = ["time"]\n', "mcp_server"),
    ('[signin.groups.x]\nrequest_per_minute = 5\n', "request_per_minute"),
    ('[sigin]\nmodels = ["*"]\n', "sigin"),
], ids=["key model", "key admn", "signin mcp_server", "group rate", "top level"])
def test_an_unknown_field_stops_start_up_naming_it(tmp_path: Path, text, field):
    keys_file = tmp_path / "keys.toml"
    keys_file.write_text(text.format(d="0" * 64))
    with pytest.raises(ValueError, match=f"'{field}'"):
        load_keys(keys_file, None)


def test_a_web_process_will_not_start_on_a_keys_file_it_misreads(tmp_path: Path, redis_url):
    keys_file = tmp_path / "keys.toml"
    keys_file.write_text('[keys.a]\nsha256 = "' + "0" * 64 + '"\nmax_concurent = 2\n')
    with pytest.raises(RuntimeError, match="max_concurent"):
        start_web(stack_env(redis_url, SWITCHBOARD_KEYS_FILE=str(keys_file)))[0].stop()
