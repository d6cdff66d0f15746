"""udfs/pii.py: detection quality on the labelled set, look-alikes, redaction, Arrow batch output (no Spark)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tests import pii_labelled
from udfs.pii import DEFAULT_KINDS, PiiOptions, find_pii, pii_batch
from udfs.pii_rules import KINDS, card_issuer, iban_ok, ip_kind, luhn_ok

ALL = PiiOptions()  # every kind but shell_user


@pytest.fixture(scope="module")
def labelled() -> list[pii_labelled.Doc]:
    return pii_labelled.build()


@pytest.mark.parametrize("switched", [False, True], ids=["defaults", "switches_on"])
def test_labelled_set_precision_and_recall_per_kind(labelled, switched):
    assert len(labelled) >= 300
    opts = PiiOptions(kinds=KINDS if switched else DEFAULT_KINDS, email_obfuscated=switched)
    res = pii_labelled.score(labelled, [find_pii(d.text, opts) for d in labelled], switched)
    expected = set(KINDS) if switched else set(KINDS) - {"shell_user"}
    assert set(res) == expected
    for kind, s in res.items():
        assert s["tp"] >= 15, (kind, s["tp"])
        assert s["precision"] >= 0.98, (kind, s["precision"], s["errors"][:5])
        assert s["recall"] >= 0.95, (kind, s["recall"], s["errors"][:5])


def test_labelled_set_is_deterministic():
    a, b = pii_labelled.build(40), pii_labelled.build(40)
    assert [(d.text, d.gold) for d in a] == [(d.text, d.gold) for d in b]


@pytest.mark.parametrize("text", [
    "pip install torch==2.3.1.1", "npm i left-pad@1.3.0", "pkg@1.3.0", "v1.2.3.4", "1.2.3.4-beta",
    "version 10.0.0.1", "image_tag: 17.20.9.7", "__version__ = '4.3.2.1'",
    "123e4567-e89b-12d3-a456-426614174000", "da39a3ee5e6b4b0d3255bfef95601890afd80709",
    "2024-01-15", "15.01.2024", "01/15/2024", "2024-01-15T12:30:45Z", "12:30:45",
    "48.8566, 2.3522", "-33.86882 151.20930", "ISBN 978-3-16-148410-0", "978-0-306-40615-7",
    "| 4915123456 | 20240115 |", "order 123456789012", "999.1.1.1", "256.1.1.1",
    "4111 1111 1111 1112", "DE89 3704 0044 0532 0130 01", "jane@example.com", "ops@build.example.org",
    "password: required", 'password = os.environ["DB_PASSWORD"]', "PASSWORD=${DB_PASSWORD}", "password: ********",
    "00:1a:2b:3c:4d:5e", "std::vector<int>", "intent(in)::a,b", "alice@devbox:~/src$ make",
    "write jane [at] corvid [dot] org", "1 234 567 inhabitants", "+2.5%",
])
def test_lookalikes_are_left_alone(text):
    assert find_pii(text, ALL) == []


@pytest.mark.parametrize("text, kind, value", [
    ("mail jane.doe@corvid-mail.net.", "email", "jane.doe@corvid-mail.net"),
    ("from 8.8.4.4:53", "ipv4", "8.8.4.4"),
    ("host 2a00:1450:4007:80e::200e", "ipv6", "2a00:1450:4007:80e::200e"),
    ("gw 192.168.1.1 and doc 203.0.113.7", "ip_private", "192.168.1.1"),
    ("call +44 20 7946 0958", "phone", "+44 20 7946 0958"),
    ("Tel.: 0301234567", "phone", "0301234567"),
    ("card 4111-1111-1111-1111", "card", "4111-1111-1111-1111"),
    ("IBAN GB82WEST12345698765432", "iban", "GB82WEST12345698765432"),
    ("key AKIAIOSFODNN7EXAMPLE", "aws_key_id", "AKIAIOSFODNN7EXAMPLE"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("t=ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789", "github_token", "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"),
    ("SLACK=xoxb-123456789012-abcdefghijkl", "slack_token", "xoxb-123456789012-abcdefghijkl"),
    ("k: AIzaSyA1234567890abcdefghijklmnopqrstuv", "google_api_key", "AIzaSyA1234567890abcdefghijklmnopqrstuv"),
    ("password=hunter22)", "password", "hunter22"),
    ("お問い合わせはjane@corvid-mail.netまで", "email", "jane@corvid-mail.net"),
])
def test_each_kind_is_found(text, kind, value):
    found = find_pii(text, ALL)
    assert (kind, text.index(value), text.index(value) + len(value)) in found


def test_switches_turn_on_prompts_obfuscated_and_example_domains():
    text = "alice@devbox:~/src$ make\nwrite jane [at] corvid [dot] org or ops@example.com\n"
    opts = PiiOptions(kinds=KINDS, email_obfuscated=True, email_example_domains=True)
    assert [(k, text[s:e]) for k, s, e in find_pii(text, opts)] == [
        ("shell_user", "alice@devbox"), ("email", "jane [at] corvid [dot] org"), ("email", "ops@example.com")]


def test_validators_just_inside_and_outside():
    assert ip_kind("255.255.255.254") == "ip_private" and ip_kind("256.1.1.1") is None
    assert ip_kind("1.1.1.1") == "ipv4" and ip_kind("10.0.0.1") == "ip_private"
    assert luhn_ok("4111111111111111") and not luhn_ok("4111111111111112")
    assert card_issuer("4111111111111111") == "visa" and card_issuer("411111111111111") is None  # 15-digit Visa
    assert card_issuer("378282246310005") == "amex" and card_issuer("2720990000000007") == "mastercard"
    assert card_issuer("2721000000000000") is None
    assert iban_ok("DE89370400440532013000") and not iban_ok("DE89370400440532013001")
    assert not iban_ok("DE8937040044053201300")  # one character short of Germany's 22


def test_redaction_keeps_everything_else_byte_identical():
    text = 'He said "jane@corvid-mail.net", (8.8.4.4) and [+44 20 7946 0958]; ключ=AKIAIOSFODNN7EXAMPLE.\n'
    out = pii_batch(pa.array([text]), PiiOptions())
    assert out.column("redacted_text")[0].as_py() == 'He said "<EMAIL>", (<IPV4>) and [<PHONE>]; ключ=<AWS_KEY_ID>.\n'


def test_batch_columns_offsets_and_hashes():
    texts = pa.array(["", None, "no findings here", "line one\nmail a.b@corvid-mail.net and 192.168.0.1\n"])
    out = pii_batch(texts, PiiOptions(hash_salt="s"))
    assert out.schema.names == ["redacted_text", "pii_counts", "pii_spans", "pii_n", "pii_top"]
    assert out.column("redacted_text").to_pylist() == [None, None, None, "line one\nmail <EMAIL> and 192.168.0.1\n"]
    assert out.column("pii_counts").to_pylist() == [[], [], [], [("email", 1), ("ip_private", 1)]]
    assert out.column("pii_n").to_pylist() == [0, 0, 0, 1]  # ip_private is reported, not redacted
    assert out.column("pii_top").to_pylist() == [None, None, None, "email"]
    spans = out.column("pii_spans")[3].as_py()
    t = texts[3].as_py()
    assert [(s["kind"], t[s["start"]:s["end"]]) for s in spans] == [("email", "a.b@corvid-mail.net"), ("ip_private", "192.168.0.1")]
    import hashlib
    assert spans[0]["value_hash"] == hashlib.sha256(b"sa.b@corvid-mail.net").hexdigest()[:32]
    assert "corvid" not in str(out.column("pii_spans").to_pylist())


def test_flag_only_reports(labelled):
    out = pii_batch(pa.array([d.text for d in labelled[:20]]), PiiOptions(), redact=False)
    assert out.column("redacted_text").null_count == 20
    assert sum(out.column("pii_n").to_pylist()) > 0


def test_line_scan_equals_whole_document_scan(labelled):
    """The RE2 line pre-check only skips work: batch spans equal a whole-document find_pii."""
    texts = [d.text for d in labelled]
    out = pii_batch(pa.array(texts), ALL)
    for t, spans in zip(texts, out.column("pii_spans").to_pylist(), strict=True):
        assert [(s["kind"], s["start"], s["end"]) for s in spans] == find_pii(t, ALL)
