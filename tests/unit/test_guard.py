"""guard/: what is found in the text sent to a hosted model, its stand-ins,
and the way back (issue 73's first step: detection and placeholders)."""
from __future__ import annotations

import pytest

from guard.detect import find
from guard.placeholders import PLACEHOLDER, Restorer, person_key, placeholder, replace_findings, restore

AWS_ID, AWS_SECRET = "AKIAQ3EGRH5LZ6NR4TUV", "k9Zq2Lm4Np7Rs1Tv3Wx5Yz8Ab0Cd2Ef4Gh6Ij8KL"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx7YvQ2b9XzT0kLmN\nq2b9XzT0MIIEowIBAAKC\n-----END RSA PRIVATE KEY-----"


@pytest.mark.parametrize("text, kind, value", [
    (f"aws_access_key_id = {AWS_ID}", "aws-key", AWS_ID),
    (f'aws_secret_access_key = "{AWS_SECRET}"', "aws-key", AWS_SECRET),
    (f"here:\n{PEM}\nafter", "private-key", PEM),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAE\n-----END OPENSSH PRIVATE KEY-----",
     "private-key",
     "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAE\n-----END OPENSSH PRIVATE KEY-----"),
    ('{"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEF\\n-----END PRIVATE KEY-----\\n"}',
     "private-key", "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEF\\n-----END PRIVATE KEY-----"),
    ("DATABASE_URL=postgres://app:S3cr3tPassw0rd@db.internal:5432/app", "password-in-url", "S3cr3tPassw0rd"),
    ("DB_PASSWORD=hunter2pass", "password", "hunter2pass"),
    ("export STRIPE_KEY=sk_live_51HabcdefghijklmnopqrstuvwxYZ", "stripe-key", "sk_live_51HabcdefghijklmnopqrstuvwxYZ"),
    ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789 here", "github-token", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
    ("xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx", "slack-token",
     "xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx"),
    ("ANTHROPIC_API_KEY=sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789", "anthropic-key",
     "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"),
    ("key: AIzaSyA1234567890abcdefghijklmnopqrstuv", "google-api-key", "AIzaSyA1234567890abcdefghijklmnopqrstuv"),
    ("Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "jwt",
     "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"),
], ids=lambda v: v if isinstance(v, str) and len(v) < 20 else None)
def test_each_kind_is_found_whole(text, kind, value):
    found = find(text)
    assert [(f.kind, f.value(text)) for f in found] == [(kind, value)]


@pytest.mark.parametrize("text", [
    "commit 3f786850e387550fdab836ed7e6dc881de23001b",  # a git SHA
    "id 123e4567-e89b-12d3-a456-426614174000",  # a UUID
    '"integrity": "sha512-z4PhNX7vuL3xVChQ1m2AB9Yg5AULVxXcg/SpIdNs6c5H0NE8XYXysP+DGNKHfuwvY7kxvUdBeoGlODJ6+SfaPg=="',
    "![x](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==)",
    "password = request.form['password']\nsecret = os.environ['SECRET']\napi_key = get_key()",
    'password = "changeme"\nsecret: "${SECRET}"\nAPI_KEY={{ api_key }}\nDB_PASSWORD=$DB_PASSWORD',
    "def check_password(password: str) -> bool:\n    return hmac.compare_digest(password, stored)",
    "!function(e){var t={};function n(r){if(t[r])return t[r].exports}}([function(e,t,n){e.exports=n(1)}]);",
])
def test_what_is_not_a_secret_passes_untouched(text):
    assert find(text) == []


def test_the_operators_allow_list_is_left_alone():
    text = f"fixture {AWS_ID} and ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    assert [f.kind for f in find(text, allowed=lambda value: value == AWS_ID)] == ["github-token"]


def test_a_secret_is_the_same_placeholder_in_every_turn_and_another_for_another_person():
    bob, carol = person_key(b"office", "bob"), person_key(b"office", "carol")
    text = f"use {AWS_ID} then {AWS_ID}"
    redacted, values = replace_findings(text, find(text), bob)
    [stand_in] = values
    assert redacted == f"use {stand_in} then {stand_in}" and AWS_ID not in redacted
    assert PLACEHOLDER.fullmatch(stand_in) and stand_in.startswith("SB_SECRET_AWS_KEY_")
    assert replace_findings(text, find(text), bob)[0] == redacted  # (the next turn: the same)
    assert placeholder(carol, "aws-key", AWS_ID) != stand_in


def test_only_the_persons_own_values_come_back():
    bob = person_key(b"office", "bob")
    _, values = replace_findings(AWS_ID, find(AWS_ID), bob)
    [stand_in] = values
    forged = placeholder(person_key(b"office", "carol"), "aws-key", "carols-secret-value")
    text = f"write {stand_in} and {forged} and SB_SECRET_X_000000000000"
    assert restore(text, values.get) == f"write {AWS_ID} and {forged} and SB_SECRET_X_000000000000"


@pytest.mark.parametrize("cut", range(1, 60, 3))
def test_a_placeholder_cut_across_chunks_comes_back_whole(cut):
    bob = person_key(b"office", "bob")
    _, values = replace_findings(AWS_ID, find(AWS_ID), bob)
    [stand_in] = values
    reply = f'{{"path": "~/.aws/credentials", "content": "key = {stand_in}\\n"}} and SB_SECRET_ more'
    restorer = Restorer(values.get)
    out = "".join(restorer.feed(reply[i:i + cut]) for i in range(0, len(reply), cut)) + restorer.flush()
    assert out == reply.replace(stand_in, AWS_ID)


def test_positions_hold_in_any_case_and_beside_characters_whose_lower_case_is_longer():
    text = "İİ\nDB_PASSWORD=hunter2pass\nİ and API_KEY: 'Zx9-kq2LmN4pR7sT'"
    assert [(f.kind, f.value(text)) for f in find(text)] == [("password", "hunter2pass"),
                                                             ("secret-assignment", "Zx9-kq2LmN4pR7sT")]


def test_a_key_glued_to_a_word_is_not_taken_for_one():
    assert find("mask-ant-api03-abcdefghijklmnopqrstuvwxyz0123 xAIzaSyA1234567890abcdefghijklmnopqrstuv") == []


@pytest.mark.parametrize("text", [
    "        api_key=api_key,\n        secret=secret.secret_value,\n        api_key=litellm_params.api_key,",
    'api_key="test-api-key"\nclient_secret: "reg-secret"\nheaders = {"x-goog-api-key": "x-goog-api-key"}',
    "PASSWD_MAX = nacl.bindings.crypto_pwhash_PASSWD_MAX\nPAT:  api_key=\"pat/<token>\"",
    "url = 'https://user:password@example.com' and 'postgres://app:${DB_PASSWORD}@db/app'",
    "const header = '-----BEGIN PRIVATE KEY-----';",
    '"AccessKeyId": "AKIAIOSFODNN7EXAMPLE", "SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"',
    "Connection('amqp://guest:guest@localhost:5672//') and {'OPENAI_API_KEY': 'sk-...'} and ghp_xxxxxxxxxxxxxxxxxxxx",
    "key=SESSION_DEPLOYMENT_AFFINITY_TTL_METADATA_KEY, key: convert_number_values_for_function_call_args(value)",
    "var wasm = 'AGFzbQEAAAABhoCAgAABYAAAAKIAIOSFODNN7EXAMPLEQWERTYZXCVBNMASDFGHJKL';",
])
def test_what_the_corpus_showed_is_not_taken_for_a_secret(text):
    assert find(text) == []
