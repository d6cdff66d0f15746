"""Patterns and validators of the PII stage (data for :mod:`udfs.pii`).

Every kind is one named group of a single combined regular expression (:func:`combined_pattern`), so one
``finditer`` per document finds every kind. Look-alikes (dates, timestamps, UUIDs, hashes, ISBNs, version
strings, decimals) are alternatives too, named ``skip_*``: where a look-alike starts at or before a
candidate, the regex consumes it and the match is discarded, so nothing inside it is reported. Python's
alternation is ordered (the first alternative that matches at a position wins), which is why the specific
look-alikes come before the detectors and the generic ones (decimals) after.

Sources of the shapes and checks:

* e-mail: the dot-atom subset of RFC 5322 section 3.4.1 with a letters-only TLD (so ``pkg@1.3.0`` is not
  an address); reserved example domains per RFC 2606 / RFC 6761 are left alone unless asked.
* IPv4: dotted quad, octets 0-255 without leading zeros (RFC 6943 section 3.1.1); IPv6: RFC 4291 section
  2.2 forms, checked by :mod:`ipaddress`; private, loopback, link-local, documentation (RFC 5737, RFC
  3849) and other non-global ranges are reported as ``ip_private`` (``ipaddress``'s ``is_global``).
* phone: candidate shapes here, validity by Google's libphonenumber (``phonenumbers``).
* payment cards: Luhn (ISO/IEC 7812-1 annex B) and issuer prefixes and lengths (ISO/IEC 7812 IIN
  ranges as published by the networks: Visa, Mastercard, Amex, Discover, JCB, Diners, UnionPay).
* IBAN: ISO 13616-1 country lengths and the mod-97 check (ISO 7064 MOD 97-10).
* secrets: the token shapes documented by their issuers (AWS IAM key id prefixes, GitHub token prefixes
  ``ghp_ gho_ ghu_ ghs_ ghr_ github_pat_``, Slack ``xox?-``, Google ``AIza``) and PEM (RFC 7468) private
  key blocks; the same shapes detect-secrets' plugins use.
"""

from __future__ import annotations

import ipaddress
import re

KINDS: tuple[str, ...] = (
    "email", "ipv4", "ipv6", "ip_private", "phone", "card", "iban", "aws_key_id", "aws_secret",
    "github_token", "slack_token", "google_api_key", "private_key", "password", "shell_user",
)
"""Every kind, in the order of their integer codes (stable: reason ids are ``pii.<kind>``)."""

def _branch(first: str, not_before: str | None, name: str, rest: str) -> str:
    """One alternative: a single-character class, then a look-behind on the character before it.

    Python's ``re`` skips an alternative in one C-level test when it starts with a character class
    (``_sre``'s BRANCH fast path) but tries every alternative in full when it starts with a look-behind:
    starting each alternative with its first character made the combined scan ~10x faster.
    The named group holds the rest; the match's span (``m.span()``) is the whole candidate.
    """
    guard = f"(?<!{not_before}.)" if not_before else ""
    return f"{first}{guard}(?P<{name}>{rest})"


# ---------------------------------------------------------------------------------- look-alikes
_HEX = "[0-9A-Fa-f]"
_SKIP_FIRST = [
    # UUID (RFC 9562) and hex digests (MD5 .. SHA-512): no digit run inside may become a card or phone.
    _branch(_HEX, r"[\w-]", "skip_uuid",
            _HEX + r"{7}-" + _HEX + r"{4}-" + _HEX + r"{4}-" + _HEX + r"{4}-" + _HEX + r"{12}(?![\w-])"),
    _branch(_HEX, r"\w", "skip_hash", r"(?:(?<=0)x" + _HEX + r"{32,128}|" + _HEX + r"{31,127})(?!\w)"),
    # ISBN with or without its label (ISBN-13 prefixes 978/979 with hyphen groups).
    _branch("I", r"\w", "skip_isbn", r"SBN(?:-1[03])?:?[ \t]*[\dXx][\d\- Xx]{8,16}[\dXx]"),
    _branch("9", r"[\w-]", "skip_isbn13", r"7[89]-\d{1,5}-\d{1,7}-\d{1,7}-[\dX](?![\w-])"),
    # ISO 8601 dates and timestamps, day-month-year dates, clock times.
    _branch(r"\d", r"[\w.]", "skip_date",
            r"\d{3}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?(?!\w)"
            r"|\d?[./-]\d{1,2}[./-](?:1[6-9]|20)\d{2}(?!\w|\.\d)"
            r"|(?<!:.)\d?:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?![\w:])"),
    # Versions: "v1.2.3.4", "version 1.2.3.4", "tag: 1.2.3.4", "1.2.3.4-beta", "pkg@1.3.0", "==1.2.3.4".
    _branch("[vVrRtT]", "[A-Za-z0-9]", "skip_version",
            r"(?i:(?<=v)(?:ersion(?:__)?|er\.?)?|(?<=r)(?:elease|ev\.?)|(?<=t)ag)"
            r"[\"']?[ \t]*[:=]?[ \t]*[\"']?v?"
            r"\d+(?:\.\d+){1,5}[\w.+-]*"),
    _branch(r"\d", None, "skip_pin", r"(?:(?<=[=~<>]=.)|(?<=[@^].))\d*(?:\.\d+){1,5}[\w.+-]*"),
    _branch(r"\d", r"[\w.]", "skip_prerelease",
            r"\d*(?:\.\d+){2,5}-(?i:alpha|beta|rc|dev|pre|snapshot|final|post|b|a)[\w.]*"),
]

# ------------------------------------------------------------------------------------ detectors
_LOCAL_CH = r"[A-Za-z0-9_%+-]"
_DOMAIN = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}"
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_OCTET_REST = r"(?:(?<=2)(?:5[0-5]|[0-4]\d)|(?<=1)\d\d|(?<=[1-9])\d|)"  # an octet after its first digit
_AT = r" ?[\[({] ?(?i:at) ?[\])}] ?"
_DOT = r" ?[\[({] ?(?i:dot) ?[\])}] ?"
_PHONE_END = r"(?![\w]|[ .,:/-]\d)"  # never a prefix of a longer digit sequence
_PHONE_NB = r"[\w+/.,:-]"
_PHONE_LABEL = r"(?i:(?<=t)el|(?<=f)ax|(?<=p)hone|(?<=m)obile|(?<=c)ell|(?<=h)andy|(?<=t)elefon|" \
               r"(?<=t)éléphone|" \
               r"(?<=t)eléfono|(?<=t)elefono|(?<=т)ел)|(?<=電)話"

DETECTORS: dict[str, str] = {
    # Private keys first: a PEM block holds base64 lines that other detectors must not see.
    "private_key": _branch("-", None, "private_key",
                           r"----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----"
                           r"[\s\S]{16,16384}?-----END (?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?-----"),
    # user@host at a prompt: at a line start (or after "[" / a space), then ":path$ " or " dir]$ ".
    "shell_user": _branch("[a-z_]", r"[^\n\[ ]", "shell_user",
                          r"[a-z0-9_.-]{0,31}@[A-Za-z0-9][\w.-]{0,62}"
                          r"(?=(?::[~/]\S*|[ \t][~/\w.-]+\]|\])[ \t]?[$#%](?:[ \t]|$))"),
    "aws_key_id": _branch("A", "[A-Za-z0-9]", "aws_key_id",
                          r"(?:KIA|SIA|BIA|CCA|GPA|IDA|ROA|NPA|NVA|IPA)[A-Z2-7]{16}(?![A-Za-z0-9])"),
    "aws_secret": _branch("[aAsS]", r"\w", "aws_secret",
                          r"(?i:(?<=a)ws.?secret.?(?:access.?)?key|(?<=s)ecret.?access.?key)"
                          r"[\"']?[ \t]{0,3}(?::|=|=>|[ \t])"
                          r"[ \t]{0,3}[\"']?"
                          r"(?P<aws_secret_v>(?<![A-Za-z0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=]))"),
    "github_token": _branch("g", r"[A-Za-z0-9_]", "github_token",
                            r"(?:h[pousr]_[A-Za-z0-9]{36}|ithub_pat_[A-Za-z0-9_]{82})(?![A-Za-z0-9_])"),
    "slack_token": _branch("x", r"[A-Za-z0-9-]", "slack_token",
                           r"ox[abposr]-[A-Za-z0-9-]{10,80}(?![A-Za-z0-9-])"),
    "slack_webhook": _branch("h", None, "slack_webhook",
                             r"ttps://hooks\.slack\.com/services/T[A-Z0-9]{6,12}/B[A-Z0-9]{6,12}/[A-Za-z0-9]{20,32}"),
    "google_api_key": _branch("A", r"[\w-]", "google_api_key", r"Iza[0-9A-Za-z_-]{35}(?![\w-])"),
    "password": _branch("[pPsScCaAdD]", r"[\w.]", "password",
                        r"(?i:(?<=p)(?:assword|asswd|wd|assphrase|ass)|(?<=s)ecret|(?<=c)lient_secret|"
                        r"(?<=a)(?:pi_?key|uth_?token|ccess_?token)|(?<=d)b_pass(?:word)?)[\"']?[ \t]{0,3}"
                        r"(?P<password_op>:=|=>|=|:)[ \t]{0,3}(?P<password_q>[\"'`]?)"
                        r"(?P<password_v>[^\s\"'`,;]{4,200})"),
    "email": _branch(_LOCAL_CH, r"[\w.+%-]", "email",
                     r"[A-Za-z0-9._%+-]{0,63}(?<!\.)@" + _DOMAIN + r"(?![\w-]|\.[A-Za-z0-9])"),
    "email_obfuscated": _branch(_LOCAL_CH, r"[\w.+%-]", "email_obfuscated",
                                r"[A-Za-z0-9._%+-]{0,63}" + _AT + r"[A-Za-z0-9-]{1,63}(?:(?:" + _DOT
                                + r"|\.)[A-Za-z0-9-]{1,63})*(?:" + _DOT + r")[A-Za-z]{2,24}(?!\w)"),
    "phone_labelled": _branch("[tTfFpPmMcChHтТ電]", r"\w", "phone_labelled",
                              r"(?:" + _PHONE_LABEL + r")\.?:?[ \t]?(?P<phone_labelled_v>\+?\d{7,15})"
                              + _PHONE_END),
    "iban": _branch("[A-Z]", "[A-Za-z0-9]", "iban",
                    r"[A-Z]\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?(?![A-Za-z0-9])"),
    "ipv4": _branch(r"\d", r"[\w.:-]", "ipv4", _OCTET_REST + r"(?:\." + _OCTET + r"){3}(?!\w|[.-]\w)"),
    "ipv6": _branch("[0-9A-Fa-f:]", r"[\w:.]", "ipv6",
                    r"(?:(?<=:)|" + _HEX + r"{0,3}:)(?:" + _HEX + r"{0,4}:){1,6}(?:" + _HEX + r"{1,4}|"
                    + _OCTET
                    + r"(?:\." + _OCTET + r"){3})?(?![\w:]|\.\w)"),
    "card": _branch(r"\d", r"[\w.+-]", "card",
                    r"(?:\d{3}(?P<card_sep>[ -])\d{4}(?P=card_sep)\d{4}(?P=card_sep)\d{4}"
                    r"(?:(?P=card_sep)\d{3})?"
                    r"|\d{3}(?P<amex_sep>[ -])\d{6}(?P=amex_sep)\d{4,5}|\d{12,18})(?!\w|[.,-]\d)"),
    # Phone candidates: "+CC ...", "(area) ...", national trunk-0 and NANP shapes with separators (a bare
    # digit run only after a label, above); libphonenumber then decides (udfs.pii.phone_ok).
    "phone_intl": _branch(r"\+", _PHONE_NB, "phone_intl",
                          r"\d{1,3}[ .-]?(?:\(0?\d{1,4}\)[ .-]?)?\d{1,12}(?:[ .-]\d{1,8}){0,5}" + _PHONE_END),
    "phone_paren": _branch(r"\(", _PHONE_NB, "phone_paren",
                           r"\d{2,5}\)[ .-]?\d{2,5}(?:[ .-]\d{2,5}){1,3}" + _PHONE_END),
    "phone_trunk": _branch("0", _PHONE_NB, "phone_trunk",
                           r"\d{1,4}[ ./-]\d{2,8}(?:[ ./-]\d{2,5}){0,4}" + _PHONE_END),
    "phone_nanp": _branch("[2-9]", _PHONE_NB, "phone_nanp", r"\d{2}[ .-]\d{3}[ .-]\d{4}" + _PHONE_END),
}
"""Named-group pattern of each detector; ``<name>_v`` names the value when context (a key name, a
label) is part of the match."""

VALUE_GROUP: dict[str, str] = {
    "aws_secret": "aws_secret_v", "password": "password_v", "phone_labelled": "phone_labelled_v",
}
DETECTOR_KIND: dict[str, str] = {
    **{k: k for k in KINDS}, "email_obfuscated": "email", "slack_webhook": "slack_token",
    **{d: "phone" for d in ("phone_labelled", "phone_intl", "phone_paren", "phone_trunk", "phone_nanp")},
}
"""The kind each detector reports."""
_EARLY = ("private_key", "shell_user", "aws_key_id", "aws_secret", "github_token", "slack_token",
          "slack_webhook",
          "google_api_key", "password", "email", "email_obfuscated", "phone_labelled")


def combined_pattern(detectors: tuple[str, ...]) -> re.Pattern[str]:
    """Compile the one regex holding the look-alikes and the given detectors (names of :data:`DETECTORS`).

    Raises:
        ValueError: an unknown detector name.
    """
    unknown = [d for d in detectors if d not in DETECTORS]
    if unknown:
        raise ValueError(f"unknown PII detectors {unknown}; allowed: {list(DETECTORS)}")
    order = [d for d in DETECTORS if d in detectors]
    # Secrets and e-mail go before the look-alikes: a hash-like token inside a key is still a key.
    parts = [DETECTORS[d] for d in order if d in _EARLY] + _SKIP_FIRST
    parts += [DETECTORS[d] for d in order if d not in _EARLY]
    # ASCII classes: an address glued to Japanese or Cyrillic text ("連絡はjane@…") is still found.
    return re.compile("|".join(parts), re.ASCII)


# ----------------------------------------------------------------------------------- validators
RESERVED_DOMAINS: tuple[str, ...] = (
    "example.com", "example.net", "example.org", "example", "test", "invalid", "localhost")
"""RFC 2606 / RFC 6761 names reserved for documentation and testing."""


def is_reserved_email(value: str) -> bool:
    """True when the address's domain is (under) a reserved documentation/testing name."""
    domain = value.rsplit("@", 1)[-1].lower()
    return any(domain == d or domain.endswith("." + d) for d in RESERVED_DOMAINS)


def ip_kind(value: str) -> str | None:
    """``ipv4``/``ipv6`` for a global address, ``ip_private`` for any other range, None if not one."""
    try:
        addr = ipaddress.ip_address(value)
    except ValueError:
        return None
    if addr.version == 6 and (value.count(":") < 2 or not any(c.isdigit() for c in value)):
        return None  # "::a", "dead::beef": code (Fortran/C++ scopes), not addresses
    if not addr.is_global:
        return "ip_private"
    return "ipv4" if addr.version == 4 else "ipv6"


def luhn_ok(digits: str) -> bool:
    """Luhn check (ISO/IEC 7812-1 annex B) of a string of ASCII digits."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def card_issuer(digits: str) -> str | None:
    """The card network whose IIN range and length ``digits`` fits, else None."""
    n, p2, p4, p6 = len(digits), int(digits[:2]), int(digits[:4]), int(digits[:6])
    if digits[0] == "4" and n in (16, 19):
        return "visa"
    if (51 <= p2 <= 55 or 2221 <= p4 <= 2720) and n == 16:
        return "mastercard"
    if p2 in (34, 37) and n == 15:
        return "amex"
    if (digits.startswith("6011") or digits.startswith("65") or 644 <= p4 // 10 <= 649
            or 622126 <= p6 <= 622925) and 16 <= n <= 19:
        return "discover"
    if 3528 <= p4 <= 3589 and 16 <= n <= 19:
        return "jcb"
    if (300 <= p4 // 10 <= 305 or p2 in (36, 38, 39)) and n == 14:
        return "diners"
    if p2 == 62 and 16 <= n <= 19:
        return "unionpay"
    return None


IBAN_LENGTHS: dict[str, int] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29,
    "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24,
    "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21,
    "HU": 28, "IE": 22, "IL": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LI": 21,
    "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30,
    "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24,
    "SE": 24, "SI": 19, "SK": 24, "SM": 27, "TN": 24, "TR": 26, "UA": 29, "VG": 24, "XK": 20,
}
"""IBAN length per country (ISO 13616 registry, SWIFT release 2024)."""


def iban_ok(compact: str) -> bool:
    """Country length and ISO 7064 MOD 97-10 check of an IBAN without spaces."""
    if IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


_PLACEHOLDER = re.compile(
    r"^(?:\$\{?\w+\}?|%\(?\w+\)?s?|\{\{.*\}\}|<[^>]*>|\*+|x+|\.+|null|none|nil|true|false|undefined|"
    r"required|optional|string|str|env|os\.environ.*|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|[A-Za-z_]\w*\(.*)$",
    re.IGNORECASE,
)


def password_ok(value: str, quoted: bool, op: str) -> bool:
    """Whether a ``password=``-style value is a literal secret rather than a placeholder or an expression.

    Unquoted values after ``:`` (prose, YAML) must hold a digit or a symbol, so "Password: required"
    and "password: reset it" are not secrets; references (``$VAR``, ``${VAR}``, ``{{ var }}``,
    ``<password>``), masks (``****``), literals (``null``, ``true``), attribute paths and calls are not.
    """
    v = value.rstrip(".)]}>")
    if len(v) < 4 or _PLACEHOLDER.match(v):
        return False
    if op == ":" and not quoted:
        return any(not c.isalpha() for c in v)
    return True
