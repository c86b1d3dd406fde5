"""The keys and logins sign-in gives people (identity/own_keys.py,
identity/device_login.py) on a real Redis, and the keys file's sign-in policy
that decides what those keys may do (identity/keys.py)."""
from __future__ import annotations

import json
import time

import pytest

from identity import device_login, own_keys
from identity.keys import ApiKey, KeyRing, SignInPolicy, digest, load_keys, read_signin_policy
from protocol import keys

POLICY_TOML = '''
[signin]
models = ["echo*"]
max_concurrent = 2

[signin.groups.ml-team]
models = ["*"]
max_concurrent = 8

[signin.groups.staff]
max_concurrent = 3
'''


@pytest.fixture
def policy(tmp_path) -> SignInPolicy:
    path = tmp_path / "keys.toml"
    path.write_text(POLICY_TOML)
    return read_signin_policy(path)


@pytest.mark.parametrize("groups, most, allows_smollm", [
    ((), 2, False), (("staff",), 3, False), (("staff", "ml-team"), 8, True), (("other",), 2, False),
], ids=["no-group", "staff-inherits-the-models", "first-group-in-the-file-wins", "an-unknown-group"])
def test_a_persons_policy_is_their_first_group_in_the_files_order(policy, groups, most, allows_smollm):
    template = policy.template(groups)
    assert template.max_concurrent == most and template.allows("smollm2:135m") is allows_smollm


def test_a_minted_key_may_use_only_models_its_policy_allows(policy):
    key = policy.key_of("bob", (), ("echo", "smollm2:135m", "ech?*"), "k-1")
    assert (key.name, key.key_id, key.admin) == ("signin:bob", "k-1", False)
    assert key.allows("echo") and key.allows("echo:slow")
    assert not key.allows("smollm2:135m")  # (asked for, but not its policy's)
    assert policy.key_of("bob", (), None, "k-1").allows("echo:tools")
    assert not policy.key_of("bob", (), ("echo",), "k-1").allows("echo:tools")  # (its policy's, but not asked)


def signed_in(redis, person: str, groups: tuple[str, ...]) -> None:
    """A person as sign-in leaves them: their groups, and a refresh token to ask the provider about them."""
    redis.hset(keys.signin_person_key(person), mapping={"refresh": "sealed", "groups": json.dumps(list(groups))})


@pytest.mark.parametrize("text, says", [
    ('[signin]\nweight = 0\n', "signin.weight must be a number above 0"),
    ('[signin.groups.ml]\nmax_concurrent = -1\n', "signin.groups.ml.max_concurrent must be a whole number"),
    ('[signin]\ngroups = 3\n', "signin.groups maps a group"),
    ('signin = 3\n', "signin is a table"),
    ('[signin]\nguard = "off"\n', 'signin.guard must be "log", "redact" or "block"'),
    ('[keys.a]\nsha256 = "00"\nguard = 1\n', 'keys.a.guard must be "log", "redact" or "block"'),
], ids=["weight", "a-groups-limit", "groups-not-a-table", "signin-not-a-table", "signin-guard", "a-keys-guard"])
def test_a_bad_policy_is_refused_naming_its_field(tmp_path, text, says):
    path = tmp_path / "keys.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=says):
        load_keys(path, None)


def test_minted_keys_are_found_by_digest_until_revoked_or_suspended(clean_redis, policy):
    signed_in(clean_redis, "bob", ("staff",))
    minted = own_keys.mint(clean_redis, "bob", ("staff",), own_keys.Wanted("laptop", 600))
    found = own_keys.key_of(clean_redis, policy, digest(minted.key))
    assert (found.name, found.max_concurrent, found.key_id) == ("signin:bob", 3, minted.record["id"])
    assert minted.key not in str(clean_redis.hgetall(keys.own_key_key(digest(minted.key))))  # (only its digest)
    own_keys.suspend(clean_redis, "bob", True)
    assert own_keys.key_of(clean_redis, policy, digest(minted.key)) is None
    own_keys.suspend(clean_redis, "bob", False)
    assert own_keys.key_of(clean_redis, policy, digest(minted.key)) is not None
    clean_redis.hdel(keys.signin_person_key("bob"), "refresh")  # (a sign-in that gave no refresh token)
    assert own_keys.key_of(clean_redis, policy, digest(minted.key)) is None
    signed_in(clean_redis, "bob", ("staff",))
    assert own_keys.revoke(clean_redis, "bob", minted.record["id"])["label"] == "laptop"
    assert own_keys.key_of(clean_redis, policy, digest(minted.key)) is None
    assert own_keys.revoke(clean_redis, "bob", minted.record["id"]) is None


def test_a_key_past_its_end_is_refused_and_leaves_the_list(clean_redis, policy):
    ended = own_keys.mint(clean_redis, "bob", (), own_keys.Wanted("old", 600))
    clean_redis.hset(keys.own_key_key(digest(ended.key)), "expires", time.time() - 1)
    clean_redis.zadd(keys.own_keys_key("bob"), {digest(ended.key): time.time() - 1})
    kept = own_keys.mint(clean_redis, "bob", (), own_keys.Wanted("new", 600))
    assert own_keys.key_of(clean_redis, policy, digest(ended.key)) is None
    assert [k["label"] for k in own_keys.of_person(clean_redis, "bob")] == ["new"]
    assert own_keys.revoke_all(clean_redis, "bob") == 1 and own_keys.key_of(
        clean_redis, policy, digest(kept.key)) is None


def test_a_key_ring_finds_minted_keys_after_the_files(tmp_path, policy):
    ring = KeyRing([ApiKey("ops", sha256=digest("file-key"))])
    ring.find_minted = lambda found: ApiKey("bob") if found == digest("minted-key") else None
    assert ring.identify("file-key").name == "ops" and ring.identify("minted-key").name == "bob"
    with pytest.raises(Exception, match="invalid or missing API key"):
        ring.identify("neither")
    assert KeyRing([]).enabled is False
    ring = KeyRing([])
    ring.signin = True
    assert ring.enabled  # (sign-in turns keys on, even with no keys file)


# --- command-line logins (the device grant) ------------------------------------------------------------------
@pytest.mark.parametrize("typed, normal", [
    ("bcdf-ghjk", "BCDF-GHJK"), ("BCDFGHJK", "BCDF-GHJK"), (" bcdf ghjk ", "BCDF-GHJK"), ("BCD", ""), ("", ""),
], ids=["lower", "no-dash", "spaces", "short", "empty"])
def test_a_user_code_is_read_as_typed(typed, normal):
    assert device_login.normal_user_code(typed) == normal


def test_a_device_login_is_approved_once_and_its_login_used(clean_redis):
    started = device_login.start(clean_redis, "a laptop")
    with pytest.raises(device_login.Refused) as pending:
        device_login.poll(clean_redis, started.device_code)
    assert pending.value.error == "authorization_pending"
    with pytest.raises(device_login.Refused) as too_fast:
        device_login.poll(clean_redis, started.device_code)
    assert too_fast.value.error == "slow_down"
    assert device_login.waiting(clean_redis, started.user_code.lower())["label"] == "a laptop"
    assert device_login.decide(clean_redis, started.user_code, "carol", ("staff",), True)["status"] == "approved"
    assert device_login.decide(clean_redis, started.user_code, "mallory", (), True) is None  # (answered once)
    login = device_login.new_login(clean_redis, device_login.poll(clean_redis, started.device_code), 30)
    assert (login.person, login.groups, login.label) == ("carol", ("staff",), "a laptop")
    with pytest.raises(device_login.Refused) as again:
        device_login.poll(clean_redis, started.device_code)
    assert again.value.error == "expired_token"
    assert device_login.use(clean_redis, login.token, 30).person == "carol"
    assert [entry["label"] for entry in device_login.of_person(clean_redis, "carol")] == ["a laptop"]
    assert login.token not in str(clean_redis.keys("*"))  # (only its digest)
    assert device_login.end_all(clean_redis, "carol") == 1
    with pytest.raises(device_login.Refused) as ended:
        device_login.use(clean_redis, login.token, 30)
    assert ended.value.error == "invalid_grant"


def test_a_denied_device_login_gives_nothing(clean_redis):
    started = device_login.start(clean_redis, "tool")
    device_login.decide(clean_redis, started.user_code, "carol", (), False)
    with pytest.raises(device_login.Refused) as denied:
        device_login.poll(clean_redis, started.device_code)
    assert denied.value.error == "access_denied" and device_login.of_person(clean_redis, "carol") == []


@pytest.mark.parametrize("token", ["", "sbl-made-up", "not-ours", "sbl-" + "x" * 300],
                         ids=["empty", "made-up", "another-shape", "long"])
def test_a_login_token_that_was_never_given_is_refused(clean_redis, token):
    with pytest.raises(device_login.Refused, match="log in again"):
        device_login.use(clean_redis, token, 30)


def test_a_keys_guard_and_a_signin_policys_reach_its_keys(tmp_path):
    path = tmp_path / "keys.toml"
    path.write_text(f'[keys.a]\nsha256 = "{digest("k")}"\nguard = "block"\n\n[signin]\nguard = "redact"\n')
    ring = load_keys(path, None)
    assert ring.identify("k", "127.0.0.1").guard == "block"
    assert read_signin_policy(path).key_of("bob", (), None, "k-1").guard == "redact"
