"""The PII labelled set: invented documents with gold spans, written deterministically (seeded).

Every value is invented here: e-mail local parts and domains are made of random syllables, phone
numbers are libphonenumber's own example numbers with their last digits changed (and checked valid),
card numbers and IBANs are random digits with a computed check digit, tokens and keys are random
characters in the issuers' shapes. No value belongs to a person.

Each document is prose (en, de, fr, es, ja, ru), code (Python, YAML, .env, JSON), a log, or a table,
and mixes findings with look-alikes (versions, package pins, UUIDs, hashes, dates, timestamps,
coordinates, ISBNs, table digit runs, invalid addresses and check digits, placeholders, example
domains, shell prompts and obfuscated addresses, which count only with their switches).

``python tests/pii_labelled.py`` prints the per-kind figures.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field

import phonenumbers

from udfs.pii_rules import IBAN_LENGTHS, KINDS

SEED = 17
N_DOCS = 360


@dataclass
class Doc:
    """One labelled document: ``gold`` holds ``(kind, start, end)`` with the default switches,
    ``gold_switched`` with ``email_obfuscated`` on and ``shell_user`` among the kinds."""

    id: str
    genre: str
    text: str = ""
    gold: list[tuple[str, int, int]] = field(default_factory=list)
    gold_switched: list[tuple[str, int, int]] = field(default_factory=list)

    def add(self, piece: str, kind: str | None = None, switched_kind: str | None = None) -> Doc:
        s = len(self.text)
        self.text += piece
        if kind:
            self.gold.append((kind, s, len(self.text)))
        if kind or switched_kind:
            self.gold_switched.append((kind or switched_kind, s, len(self.text)))
        return self


class Values:
    """Invented values in the shapes of each kind."""

    SYL = ["ka", "lo", "mi", "ren", "to", "vu", "sel", "dar", "qui", "bro", "nef", "ost", "pla", "zin", "mor"]
    TLDS = ["net", "org", "io", "de", "fr", "es", "co.uk", "info", "app", "dev"]

    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def word(self, n: int = 2) -> str:
        return "".join(self.r.choice(self.SYL) for _ in range(n))

    def email(self) -> str:
        sep = self.r.choice([".", "_", "-", ""])
        local = self.word(2) + sep + self.word(self.r.randint(1, 3)) + self.r.choice(["", str(self.r.randint(1, 99))])
        return f"{local}@{self.word(2)}-{self.word(1)}.{self.r.choice(self.TLDS)}"

    def ipv4(self) -> str:
        import ipaddress
        while True:
            ip = ".".join(str(self.r.randint(1, 254)) for _ in range(4))
            if ipaddress.ip_address(ip).is_global:
                return ip

    def ipv6(self) -> str:
        groups = [f"2a0{self.r.randint(0, 9)}"] + [f"{self.r.randint(0, 0xffff):x}" for _ in range(7)]
        if self.r.random() < 0.5:
            return ":".join(groups)
        return ":".join(groups[:3]) + "::" + groups[-1]

    def ip_private(self) -> str:
        r = self.r
        return r.choice([
            f"10.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}", f"192.168.{r.randint(0, 255)}.{r.randint(1, 254)}",
            f"172.{r.randint(16, 31)}.{r.randint(0, 255)}.{r.randint(1, 254)}", "127.0.0.1",
            f"192.0.2.{r.randint(1, 254)}", f"198.51.100.{r.randint(1, 254)}", f"203.0.113.{r.randint(1, 254)}",
            f"2001:db8::{r.randint(1, 0xffff):x}", f"fe80::{r.randint(1, 0xffff):x}:{r.randint(1, 0xffff):x}", "::1",
        ])

    def phone(self) -> str:
        P = phonenumbers
        while True:
            region = self.r.choice(["US", "GB", "DE", "FR", "ES", "IT", "NL", "JP", "BR", "IN", "CH", "SE"])
            kind = self.r.choice([P.PhoneNumberType.MOBILE, P.PhoneNumberType.FIXED_LINE])
            ex = P.example_number_for_type(region, kind)
            nsn = str(ex.national_number)
            k = min(3, len(nsn) - 4)
            nsn = nsn[:-k] + "".join(self.r.choice(string.digits) for _ in range(k))
            num = P.parse(f"+{ex.country_code}{nsn}", None)
            if not P.is_valid_number(num):
                continue
            fmt = self.r.choice(["intl", "intl", "e164", "national"])
            if fmt == "national" and region in ("US", "GB", "DE", "FR"):
                return P.format_number(num, P.PhoneNumberFormat.NATIONAL)
            if fmt == "e164":
                return P.format_number(num, P.PhoneNumberFormat.E164)
            return P.format_number(num, P.PhoneNumberFormat.INTERNATIONAL)

    def _luhn_complete(self, body: str) -> str:
        for d in string.digits:
            from udfs.pii_rules import luhn_ok
            if luhn_ok(body + d):
                return body + d
        raise AssertionError(body)

    def card(self) -> str:
        prefix, n = self.r.choice([("4", 16), ("51", 16), ("55", 16), ("2221", 16), ("34", 15), ("37", 15),
                                   ("6011", 16), ("3530", 16), ("36", 14), ("62", 16), ("4", 19)])
        body = prefix + "".join(self.r.choice(string.digits) for _ in range(n - len(prefix) - 1))
        num = self._luhn_complete(body)
        style = self.r.choice(["", " ", "-"])
        if not style or n not in (15, 16):
            return num
        if n == 15:
            return style.join([num[:4], num[4:10], num[10:]])
        return style.join(num[i:i + 4] for i in range(0, 16, 4))

    def card_invalid(self) -> str:
        valid = self.card().replace(" ", "").replace("-", "")
        return valid[:-1] + str((int(valid[-1]) + self.r.randint(1, 9)) % 10)

    def iban(self, valid: bool = True) -> str:
        cc = self.r.choice(["DE", "FR", "GB", "ES", "IT", "NL", "BE", "CH", "AT", "PL"])
        n = IBAN_LENGTHS[cc] - 4
        if cc == "GB" or cc == "NL":
            bban = "".join(self.r.choice(string.ascii_uppercase) for _ in range(4)) + "".join(
                self.r.choice(string.digits) for _ in range(n - 4))
        else:
            bban = "".join(self.r.choice(string.digits) for _ in range(n))
        num = int("".join(str(int(c, 36)) for c in bban + cc + "00"))
        check = 98 - num % 97
        if not valid:
            check = (check + self.r.randint(1, 50)) % 97 + 2
        compact = f"{cc}{check:02d}{bban}"
        return " ".join(compact[i:i + 4] for i in range(0, len(compact), 4)) if self.r.random() < 0.5 else compact

    def chars(self, alphabet: str, n: int) -> str:
        return "".join(self.r.choice(alphabet) for _ in range(n))

    def aws_key_id(self) -> str:
        return self.r.choice(["AKIA", "ASIA"]) + self.chars(string.ascii_uppercase + "234567", 16)

    def aws_secret(self) -> str:
        return self.chars(string.ascii_letters + string.digits + "/+", 40)

    def github_token(self) -> str:
        if self.r.random() < 0.2:
            return "github_pat_" + self.chars(string.ascii_letters + string.digits + "_", 82)
        return self.r.choice(["ghp_", "gho_", "ghs_"]) + self.chars(string.ascii_letters + string.digits, 36)

    def slack_token(self) -> str:
        if self.r.random() < 0.2:
            return (f"https://hooks.slack.com/services/T{self.chars(string.ascii_uppercase + string.digits, 8)}"
                    f"/B{self.chars(string.ascii_uppercase + string.digits, 8)}/{self.chars(string.ascii_letters, 24)}")
        return (f"xox{self.r.choice('bpa')}-{self.chars(string.digits, 12)}-{self.chars(string.digits, 12)}-"
                f"{self.chars(string.ascii_letters + string.digits, 24)}")

    def google_api_key(self) -> str:
        return "AIza" + self.chars(string.ascii_letters + string.digits + "_-", 35)

    def private_key(self) -> str:
        kind = self.r.choice(["RSA ", "EC ", "", "OPENSSH "])
        body = "\n".join(self.chars(string.ascii_letters + string.digits + "+/", 64) for _ in range(self.r.randint(3, 8)))
        return f"-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----"

    def password(self) -> str:
        return self.chars(string.ascii_letters, self.r.randint(3, 6)) + self.chars(string.digits + "!#%&*", 2) + \
            self.chars(string.ascii_letters + string.digits, self.r.randint(2, 6))

    def uuid(self) -> str:
        h = self.chars("0123456789abcdef", 32)
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def hexhash(self) -> str:
        return self.chars("0123456789abcdef", self.r.choice([32, 40, 64]))

    def version(self) -> str:
        return ".".join(str(self.r.randint(0, 20)) for _ in range(self.r.choice([3, 4])))


# A look-alike is a piece of text that must yield no finding (with the default switches).
def lookalikes(v: Values) -> list[str]:
    r = v.r
    ver = v.version()
    return [
        f"pip install {v.word(2)}=={ver}", f"npm i {v.word(2)}@{ver}", f"{v.word(2)}@{ver}", f"v{v.version()}",
        f"{'.'.join(str(r.randint(1, 9)) for _ in range(4))}-beta", f"version {'.'.join(str(r.randint(1, 20)) for _ in range(4))}",
        v.uuid(), v.hexhash(), f"{r.randint(2000, 2030)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}",
        f"{r.randint(1, 28):02d}.{r.randint(1, 12):02d}.{r.randint(1990, 2030)}", f"{r.randint(1, 12):02d}/{r.randint(1, 28):02d}/{r.randint(1990, 2030)}",
        f"{r.randint(2000, 2030)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}Z",
        f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}",
        f"{r.uniform(-80, 80):.4f}, {r.uniform(-170, 170):.4f}", f"{r.uniform(-80, 80):.5f} {r.uniform(-170, 170):.5f}",
        f"ISBN 978-{r.randint(0, 9)}-{r.randint(10, 99)}-{r.randint(100000, 999999)}-{r.randint(0, 9)}",
        f"978-{r.randint(0, 9)}-{r.randint(100, 999)}-{r.randint(10000, 99999)}-{r.randint(0, 9)}",
        f"{r.randint(256, 999)}.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(0, 255)}",
        v.card_invalid(), v.iban(valid=False), f"{v.word(2)}@example.com", f"{v.word(1)}@{v.word(1)}.example.org",
        "password: required", 'password = os.environ["DB_PASSWORD"]', "PASSWORD=${DB_PASSWORD}", "password: ********",
        f"{r.randint(0, 255):02x}:{r.randint(0, 255):02x}:{r.randint(0, 255):02x}:{r.randint(0, 255):02x}:{r.randint(0, 255):02x}:{r.randint(0, 255):02x}",
        "std::vector<int>", f"{r.randint(1, 9)} {r.randint(100, 999)} {r.randint(100, 999)} inhabitants",
        f"order {r.randint(10**9, 10**10)}", f"{r.randint(1000, 9999)},{r.randint(10, 99)} EUR",
        f"+{r.randint(1, 9)}.{r.randint(1, 9)}%",
    ]


PROSE = {
    "en": ("For questions write to {v} today.", "Our office can be reached at {v} on weekdays.", "The report lists {v} as the contact."),
    "de": ("Bei Fragen schreiben Sie an {v} bitte.", "Unser Büro erreichen Sie unter {v} werktags.", "Der Bericht nennt {v} als Kontakt."),
    "fr": ("Pour toute question, écrivez à {v} aujourd'hui.", "Notre bureau est joignable au {v} en semaine.", "Le rapport cite {v} comme contact."),
    "es": ("Para preguntas escriba a {v} hoy.", "Nuestra oficina atiende en el {v} entre semana.", "El informe menciona {v} como contacto."),
    "ja": ("ご質問は{v}までお問い合わせください。", "事務所の連絡先は{v}です。", "報告書には{v}と記載されています。"),
    "ru": ("По вопросам пишите на {v} сегодня.", "Наш офис доступен по {v} в будни.", "В отчёте указан {v} как контакт."),
}
FILLER = {
    "en": "The committee met again after the harvest season and agreed on the new schedule. ",
    "de": "Der Ausschuss traf sich nach der Erntezeit erneut und einigte sich auf den neuen Plan. ",
    "fr": "Le comité s'est réuni après la saison des récoltes et a adopté le nouveau calendrier. ",
    "es": "El comité se reunió después de la cosecha y aprobó el nuevo calendario. ",
    "ja": "委員会は収穫期の後に再び集まり、新しい日程に合意した。",
    "ru": "Комитет снова собрался после сбора урожая и утвердил новый график. ",
}
PII_KINDS = [k for k in KINDS if k != "shell_user"]


def _value(v: Values, kind: str) -> str:
    return getattr(v, kind)()


def _prose(doc: Doc, v: Values, lang: str, kinds: list[str]) -> None:
    templates = PROSE[lang]
    for i, kind in enumerate(kinds):
        doc.add(FILLER[lang])
        before, after = v.r.choice(templates).split("{v}")
        wrap = v.r.choice([("", ""), ("(", ")"), ('"', '"'), ("<", ">"), ("[", "]")]) if lang in ("en", "de", "fr", "es") else ("", "")
        doc.add(before + wrap[0]).add(_value(v, kind), kind).add(wrap[1] + after + " ")
        if i % 2 == 0:
            doc.add(v.r.choice(lookalikes(v)) + ". ")


def _code(doc: Doc, v: Values, kinds: list[str]) -> None:
    style = v.r.choice(["python", "yaml", "env", "json"])
    for kind in kinds:
        name = kind.upper()
        if kind == "private_key":
            doc.add(f"# {v.word(2)} deploy key\n").add(_value(v, kind), kind).add("\n")
            continue
        if kind == "aws_secret":
            q = '"' if style in ("python", "json") else ""
            key = {"python": "aws_secret_access_key = ", "yaml": "aws_secret_access_key: ", "env": "AWS_SECRET_ACCESS_KEY=",
                   "json": '"aws_secret_access_key": '}[style]
            doc.add(key + q).add(v.aws_secret(), kind).add(q + "\n")
            continue
        if kind == "password":
            key = {"python": 'password = "', "yaml": "password: '", "env": "DB_PASSWORD=", "json": '"password": "'}[style]
            end = {"python": '"', "yaml": "'", "env": "", "json": '",'}[style]
            doc.add(key).add(v.password(), kind).add(end + "\n")
            continue
        val = _value(v, kind)
        if style == "python":
            doc.add(f'{v.word(1)}_{name.lower()} = "').add(val, kind).add('"  # see ' + v.r.choice(lookalikes(v)) + "\n")
        elif style == "yaml":
            doc.add(f"{v.word(1)}_{name.lower()}: ").add(val, kind).add("\n" + f"image_tag: {v.version()}\n")
        elif style == "env":
            doc.add(f"{v.word(1).upper()}_{name}=").add(val, kind).add(f"\nBUILD_ID={v.uuid()}\n")
        else:
            doc.add(f'  "{v.word(1)}_{name.lower()}": "').add(val, kind).add(f'", "rev": "{v.hexhash()}",\n')
    doc.add(f"# built {v.r.choice(lookalikes(v))}\n")


def _log(doc: Doc, v: Values, kinds: list[str]) -> None:
    for kind in kinds:
        ts = f"{v.r.randint(2019, 2026)}-{v.r.randint(1, 12):02d}-{v.r.randint(1, 28):02d} {v.r.randint(0, 23):02d}:{v.r.randint(0, 59):02d}:{v.r.randint(0, 59):02d},{v.r.randint(100, 999)}"
        lvl = v.r.choice(["INFO", "WARN", "ERROR"])
        if kind in ("ipv4", "ipv6", "ip_private"):
            doc.add(f"{ts} {lvl} [req {v.uuid()}] connection from ").add(_value(v, kind), kind).add(f" port {v.r.randint(1024, 65535)}\n")
        elif kind in ("private_key",):
            doc.add(f"{ts} {lvl} loaded key:\n").add(_value(v, kind), kind).add("\n")
        elif kind == "aws_secret":
            doc.add(f"{ts} {lvl} env AWS_SECRET_ACCESS_KEY=").add(v.aws_secret(), kind).add("\n")
        elif kind == "password":
            doc.add(f"{ts} {lvl} retry with password=").add(v.password(), kind).add("\n")
        else:
            doc.add(f"{ts} {lvl} user field value=").add(_value(v, kind), kind).add(f" took {v.r.randint(1, 999)} ms\n")
        doc.add(f"{ts} DEBUG {v.r.choice(lookalikes(v))} ok\n")


def _table(doc: Doc, v: Values, kinds: list[str]) -> None:
    doc.add("| id | name | value | updated |\n|---|---|---|---|\n")
    for kind in kinds:
        if kind in ("private_key", "aws_secret", "password"):
            continue
        doc.add(f"| {v.r.randint(10**5, 10**10)} | {v.word(2).title()} | ").add(_value(v, kind), kind)
        doc.add(f" | {v.r.randint(2000, 2030)}-{v.r.randint(1, 12):02d}-{v.r.randint(1, 28):02d} |\n")
        doc.add(f"| {v.r.randint(10**5, 10**12)} | {v.word(2).title()} | {v.r.choice(lookalikes(v))} | {v.r.randint(10**7, 10**9)} |\n")


def _switch_doc(doc: Doc, v: Values) -> None:
    """Shell prompts and obfuscated addresses: found only with their switches on."""
    user, host = v.word(2), v.word(2) + "-" + str(v.r.randint(1, 9))
    if v.r.random() < 0.5:
        doc.add("").add(f"{user}@{host}", switched_kind="shell_user").add(":~/src$ make test\n")
        doc.add("[").add(f"{v.word(1)}@{v.word(2)}", switched_kind="shell_user").add(" build]$ ls -la\n")
    doc.add(FILLER["en"] + "Mail me at ")
    obf = f"{v.word(2)} [at] {v.word(2)} [dot] {v.r.choice(['org', 'net', 'com'])}"
    doc.add(obf, switched_kind="email").add(" or ")
    obf2 = f"{v.word(1)}(at){v.word(2)}(dot)de"
    doc.add(obf2, switched_kind="email").add(". ").add(v.email(), "email").add(" works too.\n")


def build(n_docs: int = N_DOCS, seed: int = SEED) -> list[Doc]:
    """The labelled set: ``n_docs`` documents, the same for the same seed."""
    v = Values(seed)
    docs: list[Doc] = []
    genres = ["prose"] * 4 + ["code", "log", "table"] + ["switch"] + ["lookalike"]
    for i in range(n_docs):
        genre = genres[i % len(genres)]
        doc = Doc(id=f"pii-{i:04d}", genre=genre)
        kinds = [PII_KINDS[(i * 3 + j) % len(PII_KINDS)] for j in range(v.r.randint(2, 4))]
        if genre == "prose":
            lang = list(PROSE)[(i // len(genres)) % len(PROSE)]
            _prose(doc, v, lang, [k for k in kinds if k not in ("private_key", "aws_secret", "password")] or ["email"])
        elif genre == "code":
            _code(doc, v, kinds)
        elif genre == "log":
            _log(doc, v, kinds)
        elif genre == "table":
            _table(doc, v, kinds)
        elif genre == "switch":
            _switch_doc(doc, v)
        else:
            doc.add(" ".join(v.r.sample(lookalikes(v), 12)) + "\n")
        docs.append(doc)
    return docs


def score(docs: list[Doc], found: list[list[tuple[str, int, int]]], switched: bool = False) -> dict[str, dict]:
    """Per-kind exact-span precision and recall: a finding counts when kind, start and end equal a gold span."""
    out: dict[str, dict] = {}
    for doc, pred in zip(docs, found, strict=True):
        gold = set(doc.gold_switched if switched else doc.gold)
        for kind in {k for k, _, _ in gold} | {k for k, _, _ in pred}:
            s = out.setdefault(kind, {"tp": 0, "fp": 0, "fn": 0, "errors": []})
            g = {x for x in gold if x[0] == kind}
            p = {x for x in pred if x[0] == kind}
            s["tp"] += len(g & p)
            s["fp"] += len(p - g)
            s["fn"] += len(g - p)
            s["errors"] += [(doc.id, "fp", doc.text[a:b]) for _, a, b in p - g] + [(doc.id, "fn", doc.text[a:b]) for _, a, b in g - p]
    for s in out.values():
        s["precision"] = s["tp"] / (s["tp"] + s["fp"]) if s["tp"] + s["fp"] else 1.0
        s["recall"] = s["tp"] / (s["tp"] + s["fn"]) if s["tp"] + s["fn"] else 1.0
    return out


if __name__ == "__main__":  # pragma: no cover
    from udfs.pii import DEFAULT_KINDS, PiiOptions, find_pii

    docs = build()
    for switched in (False, True):
        opts = PiiOptions(kinds=KINDS if switched else DEFAULT_KINDS, email_obfuscated=switched)
        res = score(docs, [find_pii(d.text, opts) for d in docs], switched)
        print("switches on" if switched else "defaults")
        for kind in sorted(res, key=KINDS.index):
            s = res[kind]
            print(f"  {kind:15s} tp={s['tp']:4d} fp={s['fp']:3d} fn={s['fn']:3d} P={s['precision']:.3f} R={s['recall']:.3f}"
                  f" {s['errors'][:3]}")
