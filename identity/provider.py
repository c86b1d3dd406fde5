"""Sign-in with the office's OpenID provider, as its relying party: the
authorization code flow with PKCE, the provider found from its issuer URL
(discovery), and its answer turned into an `Identity` (who the person is,
their groups, whether they are an admin, and the refresh token that lets
the server ask about them again later). No password ever reaches
Switchboard.

Authlib's OAuth 2 client makes the requests (the PKCE challenge, the
client's authentication, the code and refresh grants); joserfc checks the
ID token (its signature by the provider's published keys, issuer, audience,
expiry, nonce). The person's claims come from the ID token and the
provider's userinfo endpoint (many providers put groups only there). This
module keeps no state: a sign-in under way and the sessions are
identity/signin.py's. It is imported only with sign-in on: a web process without
it loads no HTTP client (tests/integration/test_processes.py).
"""
from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from urllib.parse import parse_qsl

import httpx
from authlib.integrations.base_client import OAuthError
from authlib.integrations.httpx_client import OAuth2Client
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from identity.people import NAME, Identity, NoLongerKnown, ProviderUnavailable, SignInFailed

DISCOVERY_SECONDS = 3600  # the provider's configuration and keys are fetched again after this
TIMEOUT_SECONDS = 10.0
TIMEOUT = httpx.Timeout(TIMEOUT_SECONDS)
PERSON_NAME = NAME  # (identity/people.py: the names a person or a key may have)
SIGNING_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


@dataclass(frozen=True)
class Started:
    """A sign-in's first step: where to send the browser, and what its return is checked against."""
    url: str
    state: str
    nonce: str
    verifier: str  # the PKCE code verifier (its S256 challenge went to the provider)


class Provider:
    def __init__(self, settings, http: httpx.Client | None = None):
        self.issuer = settings.oidc_issuer.rstrip("/")
        self._client_id = settings.oidc_client_id
        self._secret = settings.oidc_client_secret.get_secret_value() if settings.oidc_client_secret else None
        self._scope = settings.oidc_scopes
        self._extra = dict(parse_qsl(settings.oidc_auth_params))
        self._person_claim, self._group_claim = settings.oidc_person_claim, settings.oidc_admin_claim
        self._admin_groups = _names(settings.oidc_admin_groups)
        self._admins = _names(settings.oidc_admins)
        self._http = http or httpx.Client(timeout=TIMEOUT)
        self._configuration: dict | None = None
        self._keys: KeySet | None = None
        self._fetched_at = 0.0

    # --- the provider's configuration ---------------------------------------------------
    def configuration(self) -> dict:
        if self._configuration is None or time.monotonic() - self._fetched_at > DISCOVERY_SECONDS:
            found = self._get_json(f"{self.issuer}/.well-known/openid-configuration")
            if found.get("issuer", "").rstrip("/") != self.issuer:
                raise SignInFailed(f"the provider at {self.issuer} names another issuer ({found.get('issuer')!r})")
            self._configuration, self._keys, self._fetched_at = found, None, time.monotonic()
        return self._configuration

    def _key_set(self, refetch: bool = False) -> KeySet:
        if self._keys is None or refetch:
            self._keys = KeySet.import_key_set(self._get_json(self.configuration()["jwks_uri"]))
        return self._keys

    def _get_json(self, url: str, **options) -> dict:
        try:
            response = self._http.get(url, **options)
        except httpx.HTTPError as error:
            raise ProviderUnavailable(f"the identity provider cannot be reached ({type(error).__name__})") from None
        if response.status_code >= 500:
            raise ProviderUnavailable(f"the identity provider answered {response.status_code}")
        if response.status_code != 200:
            raise SignInFailed(f"the identity provider answered {response.status_code} at {url}")
        try:
            return response.json()
        except ValueError:
            raise SignInFailed(f"the identity provider's answer at {url} is not JSON") from None

    def _oauth(self, redirect_uri: str | None = None) -> OAuth2Client:
        """A client for one exchange; a refresh (no redirect) names no scope: it keeps the sign-in's."""
        return OAuth2Client(self._client_id, self._secret, scope=self._scope if redirect_uri else None,
                            redirect_uri=redirect_uri,
                            code_challenge_method="S256", timeout=TIMEOUT_SECONDS,
                            token_endpoint_auth_method="client_secret_basic" if self._secret else "none")

    # --- signing in -----------------------------------------------------------------------
    def start(self, redirect_uri: str) -> Started:
        state, nonce, verifier = secrets.token_urlsafe(24), secrets.token_urlsafe(24), secrets.token_urlsafe(48)
        url, _ = self._oauth(redirect_uri).create_authorization_url(
            self.configuration()["authorization_endpoint"], state=state, code_verifier=verifier, nonce=nonce,
            **self._extra)
        return Started(url, state, nonce, verifier)

    def finish(self, code: str, redirect_uri: str, nonce: str, verifier: str) -> Identity:
        """The person the provider's code names: the code exchanged (with the
        PKCE verifier), the ID token checked (with the nonce), their claims read."""
        configuration = self.configuration()
        with self._oauth(redirect_uri) as client:
            try:
                token = client.fetch_token(configuration["token_endpoint"], code=code, code_verifier=verifier)
            except OAuthError as error:
                raise SignInFailed(f"the identity provider refused the sign-in: {_said(error)}") from None
            except httpx.HTTPError as error:
                raise ProviderUnavailable(f"the identity provider cannot be reached ({type(error).__name__})") \
                    from None
        if "id_token" not in token:
            raise SignInFailed("the identity provider gave no ID token (is `openid` among the scopes?)")
        claims = self._id_token_claims(token["id_token"], nonce)
        return self._identity(claims | self._userinfo(token, claims["sub"]), token.get("refresh_token"))

    def _id_token_claims(self, id_token: str, nonce: str | None) -> dict:
        """The ID token's claims, checked (a refresh's token has no nonce to check)."""
        try:
            try:
                decoded = jwt.decode(id_token, self._key_set(), algorithms=SIGNING_ALGORITHMS)
            except (JoseError, ValueError):  # (the provider may have rolled its keys since they were read)
                decoded = jwt.decode(id_token, self._key_set(refetch=True), algorithms=SIGNING_ALGORITHMS)
            checks = dict(iss={"essential": True, "value": self.configuration()["issuer"]},
                          aud={"essential": True, "value": self._client_id}, exp={"essential": True},
                          sub={"essential": True})
            if nonce is not None:
                checks["nonce"] = {"essential": True, "value": nonce}
            jwt.JWTClaimsRegistry(**checks).validate(decoded.claims)
        except (JoseError, ValueError) as error:
            raise SignInFailed(f"the ID token does not check out ({type(error).__name__}: {error})") from None
        return dict(decoded.claims)

    def _userinfo(self, token: dict, subject: str) -> dict:
        endpoint = self.configuration().get("userinfo_endpoint")
        if not endpoint or "access_token" not in token:
            return {}
        found = self._get_json(endpoint, headers={"Authorization": f"Bearer {token['access_token']}"})
        if found.get("sub") != subject:
            raise SignInFailed("the provider's userinfo names another person than its ID token")
        return found

    def _identity(self, claims: dict, refresh_token: str | None) -> Identity:
        person = claims.get(self._person_claim)
        if not isinstance(person, str) or not PERSON_NAME.fullmatch(person):
            raise SignInFailed(f'the provider\'s "{self._person_claim}" claim does not name a person here '
                               f"(SWITCHBOARD_OIDC_PERSON_CLAIM): {str(person)[:100]!r}")
        found = claims.get(self._group_claim) or ()
        groups = tuple(g for g in ([found] if isinstance(found, str) else found) if isinstance(g, str))
        admin = person in self._admins or bool(self._admin_groups & set(groups))
        return Identity(person, str(claims["sub"]), groups, admin, refresh_token)

    # --- asking again ---------------------------------------------------------------------
    def refresh(self, refresh_token: str) -> dict:
        """The provider's answer to the refresh grant (its `refresh_token`,
        the new one if it rotated it, else the one given): the provider still
        answers for the person. NoLongerKnown when it refuses the token;
        ProviderUnavailable when it cannot be asked."""
        with self._oauth() as client:
            try:
                token = client.refresh_token(self.configuration()["token_endpoint"], refresh_token=refresh_token)
            except OAuthError as error:
                if error.error in ("invalid_grant", "unauthorized_client", "invalid_client"):
                    raise NoLongerKnown(_said(error)) from None
                raise ProviderUnavailable(f"the identity provider could not refresh: {_said(error)}") from None
            except httpx.HTTPError as error:
                raise ProviderUnavailable(f"the identity provider cannot be reached ({type(error).__name__})") \
                    from None
        return dict(token) | {"refresh_token": token.get("refresh_token") or refresh_token}

    def described(self, token: dict, subject: str) -> Identity:
        """The person a refresh's answer describes now (their groups read again).
        NoLongerKnown when it names another subject; ProviderUnavailable when
        its userinfo cannot be read."""
        try:
            claims = self._id_token_claims(token["id_token"], None) if "id_token" in token else {"sub": subject}
            if claims["sub"] != subject:
                raise SignInFailed("the provider's refreshed ID token names another subject")
            return self._identity(claims | self._userinfo(token, subject), token["refresh_token"])
        except ProviderUnavailable:
            raise
        except SignInFailed as failed:
            raise NoLongerKnown(str(failed)) from None

    def describe_admins(self) -> str:
        """Who is an admin here, in words (the 403 page says it)."""
        parts = []
        if self._admin_groups:
            parts.append(f'the members of {", ".join(sorted(self._admin_groups))} (the provider\'s '
                         f'"{self._group_claim}" claim)')
        if self._admins:
            parts.append(f'{", ".join(sorted(self._admins))} (SWITCHBOARD_OIDC_ADMINS)')
        return " and ".join(parts) or "nobody yet (set SWITCHBOARD_OIDC_ADMIN_GROUPS or SWITCHBOARD_OIDC_ADMINS)"


def _names(text: str) -> frozenset[str]:
    return frozenset(part.strip() for part in text.split(",") if part.strip())


def _said(error: OAuthError) -> str:
    return f"{error.error}" + (f" ({error.description})" if error.description else "")
