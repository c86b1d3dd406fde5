"""Sign-in's own logic (identity/provider.py, identity/signin.py) without a provider:
how a provider's claims name a person and an admin, what asking about a
person again does with each answer (a scripted provider: the real one is
tests/integration/test_signin.py's), and the routes when sign-in is off."""
from __future__ import annotations

import fakeredis
import pytest

from app import create_app

from app.routes.signin import THROTTLES
from identity import own_keys
from identity.keys import SignInPolicy, digest, read_signin_policy
from identity.people import Identity, NoLongerKnown, ProviderUnavailable, SignInFailed
from identity.provider import Provider
from identity.sealing import Sealer
from identity.signin import SignIn
from ledger import audit
from protocol import keys
from settings import load_settings

SETTINGS = {"oidc_issuer": "https://id.example.org", "oidc_client_id": "switchboard",
            "oidc_admin_groups": "ops, switchboard-admins", "oidc_admins": "root-person"}


def provider(**overrides) -> Provider:
    return Provider(load_settings(SETTINGS | overrides))


@pytest.mark.parametrize("claims, person, admin", [
    ({"sub": "1", "preferred_username": "alice", "groups": ["staff", "ops"]}, "alice", True),
    ({"sub": "2", "preferred_username": "bob", "groups": "staff"}, "bob", False),
    ({"sub": "3", "preferred_username": "root-person"}, "root-person", True),
    ({"sub": "4", "preferred_username": "carol@example.org", "groups": [3, "switchboard-admins"]},
     "carol@example.org", True),
], ids=["a-group", "a-group-as-a-string", "named", "an-address"])
def test_a_providers_claims_name_the_person_and_whether_they_are_an_admin(claims, person, admin):
    identity = provider()._identity(claims, "refresh")
    assert (identity.person, identity.admin, identity.refresh_token) == (person, admin, "refresh")


@pytest.mark.parametrize("claims", [{"sub": "1"}, {"sub": "1", "preferred_username": "a:b"},
                                    {"sub": "1", "preferred_username": ""}, {"sub": "1", "preferred_username": 7}],
                         ids=["missing", "a-colon", "empty", "a-number"])
def test_a_claim_that_names_nobody_usable_is_refused_naming_the_claim(claims):
    with pytest.raises(SignInFailed, match='"preferred_username" claim'):
        provider()._identity(claims, None)


def test_the_admins_are_described_as_configured():
    assert provider().describe_admins() == ('the members of ops, switchboard-admins (the provider\'s "groups" '
                                            'claim) and root-person (SWITCHBOARD_OIDC_ADMINS)')
    assert "nobody yet" in provider(oidc_admin_groups="", oidc_admins="").describe_admins()


def test_an_issuer_needs_its_client():
    with pytest.raises(ValueError, match="SWITCHBOARD_OIDC_ISSUER needs SWITCHBOARD_OIDC_CLIENT_ID"):
        load_settings({"oidc_issuer": "https://id.example.org"})


# --- asking about people again ------------------------------------------------------------------------------
class ScriptedProvider:
    """Answers each refresh with the next of `answers`: a token, or an exception to raise."""
    issuer = "https://id.example.org"

    def __init__(self, *answers):
        self.answers, self.asked = list(answers), []

    def refresh(self, token: str) -> dict:
        self.asked.append(token)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return {"refresh_token": answer}

    def described(self, token: dict, subject: str) -> Identity:
        """The person now: in the groups the script says (else staff)."""
        return Identity("carol", subject, tuple(self.groups), False, token["refresh_token"])

    groups = ("staff",)


def signed_in(redis, answers) -> tuple[SignIn, ScriptedProvider]:
    scripted = ScriptedProvider(*answers)
    signin = SignIn(load_settings(SETTINGS | {"signin_recheck_seconds": 60}), redis, Sealer(b"secret"), scripted)
    signin._remember(Identity("carol", "sub-3", ("staff",), False, "first-refresh-token"))
    return signin, scripted


def test_a_person_the_provider_still_knows_keeps_the_token_it_rotated(clean_redis):
    signin, scripted = signed_in(clean_redis, ["second-refresh-token", "third"])
    assert signin.recheck_due(now=10**10) == [] and scripted.asked == ["first-refresh-token"]
    assert "first-refresh-token" not in str(clean_redis.hgetall(keys.signin_person_key("carol")))  # (sealed)
    assert clean_redis.zscore(keys.SIGNIN_RECHECKS, "carol") == 10**10 + 60
    signin.recheck_due(now=10**10 + 61)
    assert scripted.asked[-1] == "second-refresh-token"


def test_each_recheck_reads_the_persons_groups_again(clean_redis):
    signin, scripted = signed_in(clean_redis, ["second-refresh-token"])
    minted = own_keys.mint(clean_redis, "carol", ("staff",), own_keys.Wanted("fixed", 600))
    policy = read_policy('[signin]\nmodels = ["echo"]\n[signin.groups.ml-team]\nmodels = ["*"]\n')
    assert not own_keys.key_of(clean_redis, policy, digest(minted.key)).allows("big-model")
    scripted.groups = ("staff", "ml-team")
    signin.recheck_due(now=10**10)
    assert own_keys.key_of(clean_redis, policy, digest(minted.key)).allows("big-model")


def test_a_provider_that_cannot_be_asked_is_asked_again_soon_and_suspends_nobody(clean_redis):
    signin, _ = signed_in(clean_redis, [ProviderUnavailable("down")])
    assert signin.recheck_due(now=10**10) == [] and not signin.suspended("carol")
    assert clean_redis.zscore(keys.SIGNIN_RECHECKS, "carol") == 10**10 + 60


def test_a_person_the_provider_no_longer_knows_is_suspended_until_they_sign_in_again(clean_redis):
    signin, _ = signed_in(clean_redis, [NoLongerKnown("invalid_grant")])
    minted = own_keys.mint(clean_redis, "carol", (), own_keys.Wanted("fixed", 600))
    assert signin.recheck_due(now=10**10) == ["carol"] and signin.suspended("carol")
    assert own_keys.key_of(clean_redis, signin_policy(), digest(minted.key)) is None
    assert clean_redis.zscore(keys.SIGNIN_RECHECKS, "carol") is None  # (nothing left to ask with)
    assert [e["action"] for e in audit.latest(clean_redis, 10)] == ["person suspended"]
    signin._remember(Identity("carol", "sub-3", ("staff",), False, "a-new-refresh-token"))  # she signs in again
    assert not signin.suspended("carol") and own_keys.key_of(clean_redis, signin_policy(), digest(minted.key))
    assert audit.latest(clean_redis, 1)[0]["action"] == "person restored"


def signin_policy() -> SignInPolicy:
    return SignInPolicy()


def read_policy(text: str) -> SignInPolicy:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "keys.toml"
        path.write_text(text)
        return read_signin_policy(path)


# --- with sign-in off ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("method, path", [("GET", "/login"), ("GET", "/login/callback"), ("POST", "/auth/token"),
                                          ("POST", "/auth/device"), ("POST", "/logout")])
def test_with_sign_in_off_its_routes_say_so(scripted, method, path):
    answer = scripted.client.open(path, method=method)
    assert answer.status_code == 404 and "sign-in is not configured" in answer.json["error"]["message"]


def test_one_address_may_start_only_so_many_device_logins():
    """The public routes keep a record per start: bounded per address (far above what a person does)."""
    app = create_app({"redis_url": "redis://unused:1/0"} | SETTINGS)
    app.extensions["switchboard"].redis = fakeredis.FakeRedis()
    client = app.test_client()
    answers = [client.post("/auth/device", data={"label": "tool"}).status_code
               for _ in range(THROTTLES["device logins"] + 1)]
    assert answers[:-1] == [200] * THROTTLES["device logins"] and answers[-1] == 429
    refused = client.post("/auth/device")
    assert "too many device logins" in refused.json["error"]["message"] and int(refused.headers["Retry-After"]) > 0
