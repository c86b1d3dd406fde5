"""What the guard looks for: credentials in the text a request would send
to a hosted model. A pure function of text, no I/O: `find(text)` gives
each secret found, its kind and where it is.

The patterns are Yelp's detect-secrets (1.5), a maintained credential
scanner with no model to download (presidio-analyzer needs spaCy's, and
looks for personal data, not credentials): its regex detectors for cloud,
code host, CI, chat, payment and LLM provider keys and JWTs, its basic-auth
pattern for a password in a connection string, and its keyword patterns
for values assigned to secret-looking names, with its own filters for
values that are not secrets (templates, references, sequences). Run over
the whole text at once, not line by line as its file scanner does: one
pass of each pattern over a conversation. Beside them, what it lacks:
whole private key blocks (it finds only their first line), Anthropic and
Google API keys, and an unquoted `NAME=value` only where the line is an
environment assignment (in code, an unquoted right-hand side is an
expression).
"""
from __future__ import annotations

import re
from functools import cache

from detect_secrets.filters import heuristic
from detect_secrets.plugins import keyword
from detect_secrets.plugins.base import RegexBasedDetector

from guard.finding import Finding

# detect-secrets' detectors by the kind a finding reports (its own class names, without "Detector").
_KINDS = {
    "AWSKeyDetector": "aws-key", "AzureStorageKeyDetector": "azure-storage-key", "ArtifactoryDetector":
    "artifactory-token", "BasicAuthDetector": "password-in-url", "CloudantDetector": "cloudant-key",
    "DiscordBotTokenDetector": "discord-token", "GitHubTokenDetector": "github-token", "GitLabTokenDetector":
    "gitlab-token", "IbmCloudIamDetector": "ibm-cloud-key", "IbmCosHmacDetector": "ibm-cos-key",
    "JwtTokenDetector": "jwt", "MailchimpDetector": "mailchimp-key", "NpmDetector": "npm-token",
    "OpenAIDetector": "openai-key", "PypiTokenDetector": "pypi-token", "SendGridDetector": "sendgrid-key",
    "SlackDetector": "slack-token", "SoftlayerDetector": "softlayer-key", "SquareOAuthDetector": "square-token",
    "StripeDetector": "stripe-key", "TelegramBotTokenDetector": "telegram-token", "TwilioKeyDetector": "twilio-key",
}
_OWN = [  # (kind, pattern): what detect-secrets does not find
    # (a block's body: base64, its headers, newlines or a JSON string's \n; a block cut short ends with it)
    ("private-key", re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY((?: BLOCK)?)-----((?:[A-Za-z0-9+/=\s:,\-]|"
                               r"\\[nr])*?)(?:-----END \1PRIVATE KEY\2-----|(?=[^A-Za-z0-9+/=\s:,\-\\])|\Z)")),
    ("anthropic-key", re.compile(r"sk-ant-[a-z]+\d*-[A-Za-z0-9_\-]{20,}")),  # (no leading \b: a literal first is
    ("openai-key", re.compile(r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{20,}")),  # found 20 times faster; the
    ("google-api-key", re.compile(r"AIza[0-9A-Za-z_\-]{35}")),  # boundary is checked after: _at_boundary)
]
# An environment assignment (a .env file, a shell's export: NAME=value, the whole line): its unquoted value is
# a value, not an expression (in code, `api_key=api_key,` is a keyword argument).
_ENV_LINE = re.compile(r"^\s*(?:export\s+)?[A-Z][A-Z0-9_]*=[^\s,;()]+\s*$")
# A secret-looking name followed, within a few characters, by an assignment or a colon; matched in the text
# lower-cased (a case-insensitive search is 7 times slower).
_KEYWORD_ASSIGNED = re.compile(keyword.DENYLIST_REGEX + r"""['"\]]{0,2}\s{0,3}(?:=|:|=>)""")
_QUOTED = {keyword.FOLLOWED_BY_COLON_QUOTES_REQUIRED_REGEX: 5,
           keyword.FOLLOWED_BY_EQUAL_SIGNS_QUOTES_REQUIRED_REGEX: 5,
           keyword.FOLLOWED_BY_ARROW_FUNCTION_SIGN_QUOTES_REQUIRED_REGEX: 4}
_UNQUOTED = {keyword.FOLLOWED_BY_EQUAL_SIGNS_REGEX: 5, keyword.FOLLOWED_BY_COLON_REGEX: 4}
# Values a secret-looking name is often given that are not secrets.
_NOT_VALUES = re.compile(r"(?i)^(?:true|false|null|none|nil|undefined|unused|unset|empty|dummy|fake|placeholder|"
                         r"changeme|change_me|example|sample|redacted|secret|password|pass|passwd|your[\w\-]*|xxx+|"
                         r"\*+|\.\.\.|\{\{.*\}\}|\$\{.*\}|%\(.*\)s|%s)$"
                         r"|[\s,<>]"  # a command, a sentence, a list or a template: not one secret
                         r"|^(?:test|fake|dummy|mock|example|sample|demo)"  # a test's value, by its name
                         r"|example|environ|\.\.\.|\*\*\*|xxxx"  # documentation's (AKIA...EXAMPLE, sk-...)
                         r"|^\d{4}-\d\d-\d\d|^[\d.]+$")  # a date, a number
# Words joined by - _ . / or : ("test-api-key", "reg-secret", "user_api_key_dict", "alice:alice-key"): a name.
_NAME_LIKE = re.compile(r"(?i)[a-z]+(?:[\-_./:][a-z]+)+")
# Values published as examples or for emulators, never anyone's secret.
PUBLIC_VALUES = frozenset({
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",  # Azurite's key
})
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")  # the NAME of an environment variable, not its value
MIN_KEYWORD_VALUE = 6  # shorter values of secret-looking names are rarely secrets ("1234", "abc")


@cache
def _detectors() -> tuple[tuple[str, RegexBasedDetector], ...]:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    found = []
    for cls in get_mapping_from_secret_type_to_class().values():
        kind = _KINDS.get(cls.__name__)
        if kind is not None and issubclass(cls, RegexBasedDetector):
            found.append((kind, cls()))
    return tuple(sorted(found, key=lambda pair: pair[0]))


def find(text: str, allowed=lambda value: False) -> list[Finding]:
    """The secrets in `text`, in order, none overlapping (a private key block wins over a token inside it);
    `allowed(value)`: the operator's allow-list (test fixtures, public keys)."""
    own = [Finding(kind, m.start(), m.end()) for kind, pattern in _OWN for m in pattern.finditer(text)
           if _at_boundary(text, m.start()) and (kind != "private-key" or _a_key_body(m.group(3)))]
    spans: list[Finding] = []
    gated: dict[re.Pattern, list[tuple[int, str]]] = {}  # a gate's lines, found once for every pattern behind it
    for kind, detector in _detectors():
        gate = _GATES.get(kind)
        for pattern in detector.denylist:
            if gate is None:
                spans += [_whole(_matched(kind, match), text) for match in pattern.finditer(text)]
                continue
            if gate not in gated:
                gated[gate] = list(_lines(text, gate))
            for start, line in gated[gate]:
                spans += [_whole(_shifted(_matched(kind, match), start), text) for match in pattern.finditer(line)]
    spans = [f for f in spans if f is not None and _stands_alone(f, text) and _not_an_example(f.value(text))]
    spans += own + _assigned(text)
    return _without_overlaps([f for f in spans if not allowed(f.value(text)) and f.value(text) not in PUBLIC_VALUES])


def _not_an_example(value: str) -> bool:
    """Documentation's keys (AKIAIOSFODNN7EXAMPLE), masked ones (sk-...), and code's names where a value goes
    (`key=SESSION_TTL_METADATA_KEY`, `key: convert_number_values(value)`)."""
    return not _NOT_VALUES.search(value) and not _ENV_NAME.fullmatch(value) and \
        not re.fullmatch(r"[A-Za-z]+(?:_[A-Za-z]+)+", value)


_VALUE_GROUPS = ("password-in-url", "cloudant-key", "ibm-cloud-key", "ibm-cos-key", "softlayer-key")


def _matched(kind: str, match: re.Match) -> Finding | None:
    """A detector's match: the group it captures where that is the secret (a connection string's password, a
    named value), else the whole match (a group that is only a token's prefix, `ghp`, is not the secret)."""
    groups = [i for i in range(1, (match.re.groups or 0) + 1) if match.group(i)]
    longest = max(groups, key=lambda i: len(match.group(i)), default=0)
    if kind in _VALUE_GROUPS:
        if not longest or (kind == "password-in-url" and not _a_password(match.group(longest), _user(match))):
            return None
        return Finding(kind, match.start(longest), match.end(longest))
    if longest and len(match.group(longest)) >= 8:  # (AWS's secret key, after its name)
        return Finding(kind, match.start(longest), match.end(longest))
    return Finding(kind, match.start(), match.end())


def _a_password(value: str, user: str = "") -> bool:
    return len(value) >= 4 and value != user and not _NOT_VALUES.search(value) and \
        not _NAME_LIKE.fullmatch(value) and not heuristic.is_templated_secret(value) and \
        not heuristic.is_prefixed_with_dollar_sign(value)


def _user(match: re.Match) -> str:
    """The user of a connection string's `user:password@` (guest:guest is a demo, not a secret)."""
    return match.group(0)[3:].split(":", 1)[0]


def _a_key_body(body: str) -> bool:
    """A private key block holds key material, not only its header (code that names the format)."""
    return len(re.sub(r"[^A-Za-z0-9+/=]", "", body.replace("\\n", ""))) >= 20


_BLOB_CHAR = re.compile(r"[A-Za-z0-9+/]")


def _stands_alone(finding: Finding, text: str) -> bool:
    """A token inside a longer run of letters and digits (a base64 blob, a minified bundle) is part of that
    run, not a key; a value a pattern captured (a password) stands where its pattern put it."""
    if finding.kind in _VALUE_GROUPS:
        return True
    before = text[finding.start - 1] if finding.start else " "
    after = text[finding.end] if finding.end < len(text) else " "
    return not _BLOB_CHAR.match(before) and not (_BLOB_CHAR.match(after) and after.isalnum())


# Detectors whose patterns try every position of a text (a keyword anchored by lookbehinds, a name that may
# be empty, case-insensitive) run only on the lines a cheap test says they could match (each needs a value of
# 24 characters or more): about 30 ms of a 100 KB conversation otherwise.
_LONG_VALUE = re.compile(r"[A-Za-z0-9_\-]{24,}")
_GATES = {"cloudant-key": _LONG_VALUE, "ibm-cloud-key": _LONG_VALUE, "ibm-cos-key": _LONG_VALUE,
          "softlayer-key": _LONG_VALUE, "password-in-url": re.compile("://"),
          "artifactory-token": re.compile("AKC|AP[0-9A-F]"), "mailchimp-key": re.compile("-us[0-9]")}


def _at_boundary(text: str, at: int) -> bool:
    return at == 0 or not (text[at - 1].isalnum() or text[at - 1] == "_")


def _lines(text: str, gate: re.Pattern):
    """(offset, line) of each line of `text` where `gate` matches, once each."""
    seen = -1
    for hit in gate.finditer(text):
        start = text.rfind("\n", 0, hit.start()) + 1
        if start == seen:
            continue
        seen = start
        end = text.find("\n", hit.end())
        yield start, text[start:end if end != -1 else len(text)]


def _shifted(finding: Finding | None, by: int) -> Finding | None:
    return None if finding is None else Finding(finding.kind, finding.start + by, finding.end + by)


_TOKEN_CHAR = re.compile(r"[A-Za-z0-9_\-]*")


_PREFIX_PATTERNS = ("stripe-key", "jwt")  # detectors whose pattern may stop inside the token


def _whole(finding: Finding | None, text: str) -> Finding | None:
    """To the end of the token a pattern matched the start of (Stripe's pattern takes 24 of a key's 99)."""
    if finding is None or finding.kind not in _PREFIX_PATTERNS:
        return finding
    end = _TOKEN_CHAR.match(text, finding.end).end()
    return Finding(finding.kind, finding.start, min(end, finding.start + 300))


def _assigned(text: str) -> list[Finding]:
    """Values given to secret-looking names (`DB_PASSWORD=...`, `"api_key": "..."`), on the lines that name one."""
    found = []
    lowered = text.lower()
    if len(lowered) != len(text):  # (a character whose lower case is longer: positions would shift)
        lowered = "".join(ch if len(ch.lower()) != 1 else ch.lower() for ch in text)
    for start, _ in _lines(lowered, _KEYWORD_ASSIGNED):
        end = text.find("\n", start)
        line = text[start:end if end != -1 else len(text)]
        patterns = _QUOTED | (_UNQUOTED if _ENV_LINE.match(line) else {})
        for pattern, group in patterns.items():
            for match in pattern.finditer(line):
                value = match.group(group)
                if _a_secret(value, line):
                    found.append(Finding("password" if "pass" in match.group(0).lower() else "secret-assignment",
                                         start + match.start(group), start + match.end(group)))
    return found


def _a_secret(value: str, line: str) -> bool:
    return len(value) >= MIN_KEYWORD_VALUE and not _NOT_VALUES.search(value) and not value.isalpha() and \
        not _ENV_NAME.fullmatch(value) and not _NAME_LIKE.fullmatch(value) and not (
        heuristic.is_templated_secret(value) or heuristic.is_prefixed_with_dollar_sign(value)
        or heuristic.is_sequential_string(value) or heuristic.is_indirect_reference(line)
        or heuristic.is_not_alphanumeric_string(value))


def _without_overlaps(found: list[Finding]) -> list[Finding]:
    """The longest of overlapping findings (a key block over a token in it), in order."""
    kept: list[Finding] = []
    for finding in sorted(found, key=lambda f: (f.start, -(f.end - f.start))):
        if kept and finding.start < kept[-1].end:
            continue
        kept.append(finding)
    return kept
