"""The assembled configuration, ``WinnowConfig``, and how it is loaded.

``WinnowConfig`` has one section per row of the chain declaration (:data:`pipelines.core.chain.CHAIN`,
then :data:`~pipelines.core.chain.BESIDE`), each the pydantic model ``<Name>Config`` of
``pipelines/<name>/config.py``, between the framework's own sections (``run``, ``spark``, ``pipeline``
before, ``tracking`` after; :mod:`pipelines.core.section`). Adding a stage adds its row and its package;
nothing here names a stage. A section's module may define ``cross_check(cfg)``, a rule over several
sections that the section owns: it runs once the whole config is built and raises :class:`ValueError`.

Every section is mirrored key for key in ``conf/default.yaml`` (a test checks that the YAML file equals
the model defaults and that every key carries a comment). Unknown keys and bad values fail at load time
with the key path, the value found and the allowed values.

Config is loaded from zero or more YAML files (later wins, merged recursively) plus ``a.b=c``
overrides whose values are parsed as YAML, so ``ingest.inputs='[a.jsonl, b/*.wet.gz]'`` is a list.
"""

from __future__ import annotations

import hashlib
import importlib
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml
from pydantic import Field, ValidationError, create_model, model_validator

from pipelines.core.chain import BESIDE, CHAIN, STAGES
from pipelines.core.section import (
    ConfigError,
    EvalSetConfig,
    PipelineConfig,
    RunConfig,
    Section,
    SparkConfig,
    StorageConfig,
    TrackingConfig,
    canonical_json,
    deep_merge,
    describe_error,
)

__all__ = [
    "ConfigError", "EvalSetConfig", "PipelineConfig", "RunConfig", "Section", "SparkConfig", "StorageConfig",
    "TrackingConfig", "WinnowConfig", "canonical_json", "deep_merge", "load_config", "parse_override",
    "section_class", "validate_config",
]

HEAD_SECTIONS: dict[str, type[Section]] = {"run": RunConfig, "spark": SparkConfig, "pipeline": PipelineConfig}
"""The framework's sections that come before the stages' in the config (and in ``conf/default.yaml``)."""

TAIL_SECTIONS: dict[str, type[Section]] = {"tracking": TrackingConfig}
"""The framework's sections that come after the stages' and the jobs' beside the chain."""


def _section_module(name: str) -> ModuleType:
    try:
        return importlib.import_module(f"pipelines.{name}.config")
    except ModuleNotFoundError as e:
        if e.name in (f"pipelines.{name}", f"pipelines.{name}.config"):
            raise ImportError(f"the chain declares {name!r} but there is no pipelines/{name}/config.py") from None
        raise


def section_class(name: str) -> type[Section]:
    """The config section of stage (or job beside the chain) ``name``: ``<Name>Config`` of
    ``pipelines/<name>/config.py`` (``dedup`` -> ``DedupConfig``, ``passage_dedup`` -> ``PassageDedupConfig``).

    Raises:
        ImportError: the package or its ``config`` module is missing.
        TypeError: the module has no such class, or it does not derive from :class:`Section`.
    """
    class_name = "".join(part.capitalize() for part in name.split("_")) + "Config"
    cls = getattr(_section_module(name), class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Section)):
        raise TypeError(f"pipelines/{name}/config.py must define {class_name}, a pipelines.core.section.Section")
    return cls


def _cross_checks(names: Iterable[str]) -> list[Callable[[Any], None]]:
    return [f for f in (getattr(_section_module(n), "cross_check", None) for n in names) if f is not None]


_SECTION_NAMES = (*(s.name for s in CHAIN), *(b.name for b in BESIDE))
_CROSS_CHECKS = _cross_checks(_SECTION_NAMES)


# -------------------------------------------------------------------------------------------- root
class WinnowConfigBase(Section):
    """What the assembled config has beyond its sections: the run layout and the fingerprints."""

    @model_validator(mode="after")
    def _cross_section_rules(self) -> WinnowConfigBase:
        for check in _CROSS_CHECKS:
            check(self)
        return self

    # ---- derived locations (the run layout documented in the README) ----
    def table_path(self, name: str) -> str:
        """Location of the Delta table ``name``: ``<run.root>/tables/<name>``, or in metastore mode
        (``run.catalog`` and ``run.schema`` set) the table name ``<catalog>.<schema>.<name>``, which
        :mod:`pipelines.core.tables` reads and writes through the catalog."""
        if self.run.catalog and self.run.db_schema:
            return f"{self.run.catalog}.{self.run.db_schema}.{name}"
        return _join(self.run.root, "tables", name)

    @property
    def shards_path(self) -> str:
        """Default shard root, ``<run.root>/shards``; the effective one is :attr:`shard_root`."""
        return _join(self.run.root, "shards")

    @property
    def shard_root(self) -> str:
        """Where the shard stage writes: ``shard.output`` when set, else :attr:`shards_path`; no trailing ``/``."""
        return (self.shard.output or self.shards_path).rstrip("/")

    @property
    def report_path(self) -> str:
        """Location of ``report.html`` and ``stats.json``: ``<run.root>/report``."""
        return _join(self.run.root, "report")

    @property
    def config_path(self) -> str:
        """Folder holding each stage's effective config: ``<run.root>/config``."""
        return _join(self.run.root, "config")

    # ---- fingerprints ----
    def canonical_json(self) -> str:
        """The whole config as canonical JSON (sorted keys, no whitespace), less ``tracking.parent_key``:
        a new scheduler run id every day must not make the same data a different config (manifest,
        ``_runs``), and without it the JSON is the one of configs from before the key existed."""
        return canonical_json(self.model_dump(mode="json", exclude={"tracking": {"parent_key"}}))

    def fingerprint(self) -> str:
        """sha256 hex of :meth:`canonical_json`."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()

    def stage_fingerprint(self, stage: str) -> str:
        """sha256 hex over what decides one stage's output: its own section plus ``run.seed``, plus the
        settings of other sections its ``fingerprint_keys`` hook names (:mod:`pipelines.core.hooks`; the
        tokenize stage: ``audit.*`` while it fills the audit).

        Raises:
            ValueError: ``stage`` is not one of :data:`STAGES`.
        """
        from pipelines.core.hooks import fingerprint_keys

        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; allowed: {list(STAGES)}")
        payload = {"stage": stage, "seed": self.run.seed, stage: getattr(self, stage).model_dump(mode="json")}
        extra = fingerprint_keys(stage, self.model_dump(mode="json"))
        if extra:  # absent when none: the fingerprints of the other stages stay as they were
            payload["beside"] = extra
        return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


WinnowConfig = create_model(
    "WinnowConfig",
    __base__=WinnowConfigBase,
    __module__=__name__,
    __doc__="The whole configuration: one attribute per section (``cfg.dedup.threshold``).",
    **{name: (cls, Field(default_factory=cls))
       for name, cls in [*HEAD_SECTIONS.items(), *((n, section_class(n)) for n in _SECTION_NAMES),
                         *TAIL_SECTIONS.items()]},
)
"""The assembled config model (see the module docstring); ``WinnowConfig()`` is every default."""


def _join(root: str, *parts: str) -> str:
    # Plain string joining: roots may be URIs (s3://, dbfs:/, abfss://) that pathlib would mangle.
    return "/".join([root.rstrip("/"), *parts])


# ------------------------------------------------------------------------------------------ loading
class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that also reads exponents without a dot or an exponent sign (``1e9``, ``2.5e3``)
    as floats, as YAML 1.2 does; PyYAML follows YAML 1.1, where they are strings, and an integer key said
    "not a valid integer". An integer key takes ``1e9`` and refuses ``1.5e0`` (pydantic's lax mode).

    A key given twice in one mapping is an error (YAML 1.2 section 3.2.1.1: keys are unique); PyYAML
    keeps the later value silently, so a setting written twice hid one of its values."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """A mapping node as a dict; raises ``yaml.constructor.ConstructorError`` on a repeated key."""
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *anchor` merges, and the keys given beside it override the merged ones
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, f"key {key!r} is given twice",
                    key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9]+)[eE][-+]?[0-9]+$"), list("-+.0123456789")
)


def _yaml_error(e: yaml.YAMLError) -> str:
    """A PyYAML error as one line: what is wrong and where (line and column, 1-based).

    PyYAML's own text spans several lines, shows the text with a caret under it and names the place
    ``"<unicode string>"``, not the file; a job prints one line.
    """
    problem = getattr(e, "problem", None)
    mark = getattr(e, "problem_mark", None)
    if not problem or mark is None:
        return " ".join(str(e).split())
    where = f"line {mark.line + 1}, column {mark.column + 1}"
    hint = "; YAML indents with spaces, not tabs" if "'\\t'" in problem else ""
    return f"{problem} at {where}{hint}"


def parse_override(item: str) -> dict[str, Any]:
    """Turn ``a.b.c=value`` into ``{"a": {"b": {"c": <value parsed as YAML>}}}``.

    Raises:
        ConfigError: no ``=``, or an empty key path.
    """
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key or any(not p for p in key.split(".")):
        raise ConfigError(f"--set expects KEY.PATH=VALUE (e.g. dedup.threshold=0.8); got {item!r}")
    try:
        value = yaml.load(raw, Loader=_Loader) if raw.strip() else ""
    except yaml.YAMLError as e:
        raise ConfigError(f"--set {key}: value {raw!r} is not valid YAML: {_yaml_error(e)}") from None
    node: Any = value
    for part in reversed(key.split(".")):
        node = {part: node}
    return node


def _read_yaml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"config file {str(path)!r} is a folder; give a YAML file (e.g. conf/local.yaml)")
    if not p.is_file():
        raise ConfigError(f"config file not found: {str(path)!r}")
    try:
        data = yaml.load(p.read_text(encoding="utf-8"), Loader=_Loader)
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {str(path)!r} is not valid YAML: {_yaml_error(e)}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"config file {str(path)!r} is not UTF-8 text (byte {e.object[e.start]:#04x} at "
                          f"offset {e.start}); save it as UTF-8") from None
    except OSError as e:
        raise ConfigError(f"config file {str(path)!r} cannot be read: {e.strerror}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a mapping at top level; got {type(data).__name__}")
    return data


def load_config(files: Iterable[str | Path] = (), overrides: Iterable[str] = ()) -> WinnowConfig:
    """Build the effective config: model defaults, then each file in order, then each override.

    Args:
        files: YAML files, later ones win (merged recursively).
        overrides: ``KEY.PATH=VALUE`` strings, values parsed as YAML, applied after the files.

    Returns:
        The validated :class:`WinnowConfig`.

    Raises:
        ConfigError: a file is missing or malformed, a key is unknown, or a value is out of range;
            the message names the key path, the value found and the allowed values.
    """
    data: dict[str, Any] = {}
    for f in files:
        data = deep_merge(data, _read_yaml(f))
    for o in overrides:
        data = deep_merge(data, parse_override(o))
    return validate_config(data)


def validate_config(data: Mapping[str, Any]) -> WinnowConfig:
    """Validate a plain mapping into :class:`WinnowConfig`, turning pydantic errors into :class:`ConfigError`."""
    try:
        return WinnowConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(describe_error(e, WinnowConfig)) from None
