"""The base of every config section, the framework's own sections, and the helpers sections share.

A stage's section lives in its package (``pipelines/<stage>/config.py``, class ``<Stage>Config``) and
derives from :class:`Section`; :mod:`pipelines.core.config` assembles them into ``WinnowConfig``. This
module imports no stage, so a stage's config module can import it first.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from pipelines.core.chain import STAGES
from udfs.errors import UserError


class ConfigError(UserError, ValueError):
    """A configuration file or override is invalid; the message names key, value and allowed values."""


class Section(BaseModel):
    """Base of every config section: unknown keys are errors, values are validated on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)

    @field_validator("*", mode="before")
    @classmethod
    def _bool_is_not_a_number(cls, v: Any, info: ValidationInfo) -> Any:
        # YAML reads true/yes/on as booleans and pydantic's lax mode turns them into 1/0, so a stray
        # `num_shards: yes` would silently mean 1; numbers must be written as numbers.
        if isinstance(v, bool) and info.field_name and _is_number(cls.model_fields[info.field_name].annotation):
            raise ValueError("expected a number, not true/false")
        return v


def _is_number(annotation: Any) -> bool:
    types = get_args(annotation) or (annotation,)
    return bool({int, float} & set(types)) and bool not in types


# --------------------------------------------------------------------------------------------- run
class RunConfig(Section):
    root: str = "out"
    seed: int = Field(default=42, ge=0, lt=2**63)
    # Metastore mode (both set): stage tables are <catalog>.<schema>.<name> (pipelines/core/tables.py).
    catalog: str | None = None
    db_schema: str | None = Field(default=None, alias="schema")

    # The key is run.schema; the attribute is db_schema (BaseModel has a method named schema).
    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True, serialize_by_alias=True)

    @field_validator("catalog", "db_schema")
    @classmethod
    def _identifier(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v):
            raise ValueError(f"must be a plain identifier (letters, digits, _), got {v!r}")
        return v

    @model_validator(mode="after")
    def _catalog_and_schema(self) -> RunConfig:
        if (self.catalog is None) != (self.db_schema is None):
            raise ValueError(
                f"run.catalog and run.schema go together (tables <catalog>.<schema>.<name>); got catalog="
                f"{self.catalog!r}, schema={self.db_schema!r}"
            )
        return self

    @field_validator("root")
    @classmethod
    def _root_not_blank(cls, v: str) -> str:
        # Outputs go to "<root>/tables/...": a blank root would write to /tables at the filesystem root.
        if not v.strip():
            raise ValueError("run.root must be a folder or URI (e.g. out/run1, s3://bucket/run1), not blank")
        return v


# ------------------------------------------------------------------------------------------- spark
DELTA_STATS_COLUMNS = "spark.databricks.delta.properties.defaults.dataSkippingNumIndexedCols"
"""The Spark setting behind the ``delta.dataSkippingNumIndexedCols`` property of the Delta tables a session
writes: per-column statistics of that many leading columns, -1 every column, 0 none (Delta's
``DeltaConfigs.DATA_SKIPPING_NUM_INDEXED_COLS``: an integer >= -1, default 32). Every stage sets it to 0
unless ``spark.conf`` names it (:func:`pipelines.core.runner.stage_settings`)."""


MEMORY_KEYS = ("spark.driver.memory", "spark.executor.memory", "spark.driver.memoryOverhead",
               "spark.executor.memoryOverhead", "spark.executor.pyspark.memory", "spark.driver.maxResultSize")
"""Spark settings holding a size in bytes (Spark's ``JavaUtils.byteStringAs`` format), checked before start."""


FILE_PARTITION_BYTES = "spark.sql.files.maxPartitionBytes"
"""The largest input partition of Spark's file sources (every table a stage reads): bytes, Spark's size
format (``SQLConf.FILES_MAX_PARTITION_BYTES``, default 128m)."""

SMALL_SPLIT_BYTES = 1 << 20
"""Splits (``ingest.split_bytes``) and file partitions (:data:`FILE_PARTITION_BYTES`) below this many bytes
draw a warning: each is a Spark task, whose fixed cost (scheduling, its Python worker's Arrow round trip,
ingest's summary row per split) is no longer small next to its read; 1 MiB is about 45 ms of parsing at
ingest's 23 MB per CPU-second (bench/notes.md, "Ingest alone"). Smaller is legal (tests cut small files)."""

_SIZE = re.compile(r"([0-9]+)\s*([kmgtp]?)b?")


def byte_size(value: str) -> int | None:
    """Bytes in a Spark size of a byte setting (``JavaUtils.byteStringAs`` with bytes as the unit of a bare
    number: a number, then an optional ``k``, ``m``, ``g``, ``t`` or ``p`` and an optional ``b``, any
    case), ``None`` when ``value`` is not one.

    >>> byte_size("1k"), byte_size("128MB"), byte_size("4096"), byte_size("lots")
    (1024, 134217728, 4096, None)
    """
    m = _SIZE.fullmatch(value.strip().lower())
    if m is None:
        return None
    return int(m.group(1)) << (10 * ("kmgtp".index(m.group(2)) + 1) if m.group(2) else 0)


def small_partitions_line(conf: Mapping[str, str]) -> str | None:
    """The warning for a :data:`FILE_PARTITION_BYTES` in ``spark.conf`` under :data:`SMALL_SPLIT_BYTES`,
    or ``None``.

    >>> small_partitions_line({FILE_PARTITION_BYTES: "1k"})[:62]
    'winnow: WARNING: spark.conf.spark.sql.files.maxPartitionBytes='
    >>> small_partitions_line({FILE_PARTITION_BYTES: "64m"}) is None
    True
    """
    value = conf.get(FILE_PARTITION_BYTES)
    n = byte_size(value) if value is not None else None
    if n is None or n >= SMALL_SPLIT_BYTES:
        return None
    return (f"winnow: WARNING: spark.conf.{FILE_PARTITION_BYTES}={value!r} makes a Spark task of every {n} bytes "
            f"of each table a stage reads; use at least 1m ({SMALL_SPLIT_BYTES} bytes; Spark's default 128m)")


class SparkConfig(Section):
    master: str | None = None
    shuffle_partitions: int = Field(default=200, ge=1)
    arrow_batch_rows: int = Field(default=1024, ge=1)
    jars: list[str] = Field(default_factory=list)
    conf: dict[str, str] = Field(default_factory=dict)
    log_level: Literal["ERROR", "WARN", "INFO", "DEBUG"] = "WARN"
    local_jit: Literal["c1", "tiered"] = "c1"
    small_input_mb: int = Field(default=64, ge=0)

    @field_validator("conf", mode="before")
    @classmethod
    def _scalars_as_strings(cls, v: Any) -> Any:
        # Spark's settings are strings; YAML reads `spark.sql.shuffle.partitions: 200` as a number and
        # `...enabled: true` as a boolean. Spark spells booleans in lower case.
        if not isinstance(v, dict):
            return v
        return {k: (str(x).lower() if isinstance(x, bool) else str(x) if isinstance(x, int | float) else x)
                for k, x in v.items()}

    @field_validator("conf")
    @classmethod
    def _jvm_memory_sizes(cls, v: dict[str, str]) -> dict[str, str]:
        # A bad size reaches the JVM's command line (-Xmx): the JVM does not start, and pyspark raises
        # JAVA_GATEWAY_EXITED after the JVM's own line. Spark's size format: JavaUtils.byteStringAs.
        for key in MEMORY_KEYS:
            value = v.get(key)
            if value is not None and byte_size(value) is None:
                raise ValueError(f"spark.conf.{key}={value!r}: allowed: a size such as 512m, 4g or 4096 "
                                 "(a number, then an optional k, m, g, t or p)")
        return v

    @field_validator("conf")
    @classmethod
    def _file_partition_bytes(cls, v: dict[str, str]) -> dict[str, str]:
        # Spark refuses a malformed size as the session starts, with a Java stack trace.
        value = v.get(FILE_PARTITION_BYTES)
        if value is not None and not byte_size(value):
            raise ValueError(f"spark.conf.{FILE_PARTITION_BYTES}={value!r}: allowed: a size in bytes > 0 such as "
                             "128m or 134217728 (a number, then an optional k, m, g, t or p; Spark's default 128m)")
        return v

    @field_validator("conf")
    @classmethod
    def _delta_stats_columns(cls, v: dict[str, str]) -> dict[str, str]:
        # Delta reads it only when a stage writes its first table, after the stage's work; a Java
        # stack trace then. Checked here, it fails before Spark starts, naming the key.
        value = v.get(DELTA_STATS_COLUMNS)
        if value is not None and not (re.fullmatch(r"-?[0-9]{1,10}", value) and -1 <= int(value) < 2**31):
            raise ValueError(f"spark.conf.{DELTA_STATS_COLUMNS}={value!r}: allowed: an integer >= -1 "
                             "(-1: statistics of every column, 0: none, Delta's default: \"32\")")
        return v


# ---------------------------------------------------------------------------------------- pipeline
class PipelineConfig(Section):
    stages: list[str] = Field(default_factory=lambda: list(STAGES))
    progress_s: float = Field(default=30.0, ge=0)

    @field_validator("stages")
    @classmethod
    def _known_and_ordered(cls, v: list[str]) -> list[str]:
        if not v:  # jobs/pipeline.py would start Spark, run nothing and exit 0
            raise ValueError(f"pipeline.stages is empty; list one or more of {list(STAGES)}")
        for s in v:
            if s not in STAGES:
                raise ValueError(f"unknown stage {s!r}; allowed: {list(STAGES)}")
        order = [STAGES.index(s) for s in v]
        if order != sorted(set(order)):
            raise ValueError(f"stages must be unique and in chain order {list(STAGES)}; got {v}")
        return v


# ----------------------------------------------------------------------------------- eval sets
class EvalSetConfig(Section):
    """One evaluation set whose text must not be in the training data (pipelines/decontam/stage.py)."""

    # Reason ids are decontam.<name>: stable snake_case.
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)
    paths: list[str] = Field(default_factory=list)
    table: str | None = None
    format: Literal["auto", "jsonl", "parquet"] = "auto"
    fields: list[str] = Field(min_length=1)
    id_field: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> EvalSetConfig:
        if bool(self.paths) == (self.table is not None):
            raise ValueError(
                f"eval set {self.name!r}: give exactly one of paths (JSONL/Parquet files) and table (a Delta "
                f"table path); got paths={self.paths!r}, table={self.table!r}"
            )
        if any(not f.strip() for f in self.fields):
            raise ValueError(f"eval set {self.name!r}: fields must be non-blank column names; got {self.fields!r}")
        return self


def unique_eval_set_names(sets: list[EvalSetConfig]) -> list[EvalSetConfig]:
    """``sets`` unchanged when their names are unique (a set's name is its reason id and report key).

    Raises:
        ValueError: naming the repeated names, sorted.
    """
    names = [s.name for s in sets]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"eval set names must be unique; repeated: {dup}")
    return sets


# ------------------------------------------------------------------------------------- storage
class StorageConfig(Section):
    """Object-store upload of shards when the shard output is ``s3://bucket/prefix`` (``pipelines/core/storage.py``)."""

    endpoint_url: str | None = None
    region: str | None = None
    max_concurrency: int = Field(default=8, ge=1)
    multipart_threshold_mb: int = Field(default=64, ge=5)
    multipart_chunksize_mb: int = Field(default=64, ge=5)
    max_attempts: int = Field(default=10, ge=1)
    verify_download: bool = False
    staging_dir: str | None = None


# ---------------------------------------------------------------------------------------- tracking
class TrackingConfig(Section):
    """MLflow tracking of runs (``pipelines/core/tracking.py``)."""

    mlflow: bool = False
    uri: str | None = None
    experiment: str | None = None
    timeout_s: float = Field(default=5.0, gt=0)
    # The scheduler's run this process belongs to (Databricks: {{job.run_id}}): every process with the
    # same key logs its stages under one parent MLflow run, found by its tag. Not part of the config
    # fingerprint (see WinnowConfig.canonical_json): which job run this is does not change the data.
    parent_key: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.:/-]{1,200}$")

    @field_validator("parent_key", mode="before")
    @classmethod
    def _number_is_a_key(cls, v: Any) -> Any:
        # `--set tracking.parent_key=123` reads as a YAML int; a job run id is a name, not a number.
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


# ------------------------------------------------------------------------------------- helpers
def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no insignificant whitespace, for fingerprints."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# ------------------------------------------------------------------------------------------ loading
def deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Recursively merge ``over`` into a copy of ``base``; mappings merge, everything else replaces."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = deep_merge(dict(out[k]), v)
        else:
            out[k] = v
    return out


def over_default(default: Callable[[], Mapping[str, Any]]) -> Callable[[Any], Any]:
    """The body of a ``mode="before"`` validator for a dict field whose default is not empty: the keys
    given merge over the default's (:func:`deep_merge`), as the config's sections do.

    Without it the mapping given replaced the whole default: ``--set pii.replacements.email=[MAIL]``
    failed for the thirteen other kinds it dropped, and a language added to ``refs.vocab`` (as
    docs/refs.md says to) dropped the supplied ones. A value that is not a mapping passes unchanged, for
    the field's own type check to report.

    Args:
        default: makes the field's default (JSON-like data, as a config file would hold it).
    """

    def merge(v: Any) -> Any:
        return deep_merge(dict(default()), v) if isinstance(v, Mapping) else v

    return merge


def _model_inside(tp: Any) -> Any:
    """``tp`` without ``None`` in a union (``X | None`` -> ``X``), so optional sections are walked too."""
    if get_origin(tp) in (Union, UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _model_at(parts: tuple[Any, ...], root: Any) -> Any:
    """The model class reached from model ``root`` by the key path ``parts``, walking models,
    ``dict[str, Model]`` values (``shard.mix.<source>``, a part that is the user's key) and
    ``list[Model]`` items; None where the path leaves the models."""
    tp: Any = root
    for part in parts:
        tp = _model_inside(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            field = tp.model_fields.get(part)
            if field is None:
                return None
            tp = field.annotation
        elif get_origin(tp) in (dict, Mapping):
            tp = get_args(tp)[1]
        elif get_origin(tp) in (list, tuple):
            tp = get_args(tp)[0]
        else:
            return None
    tp = _model_inside(tp)
    return tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None


def _allowed_keys(loc: tuple[Any, ...], root: Any) -> list[str]:
    """The keys allowed beside the last part of ``loc`` under model ``root`` (:func:`_model_at`); [] if
    unknown."""
    model = _model_at(loc[:-1], root)
    return sorted(model.model_fields) if model is not None else []


def _field_at(loc: tuple[Any, ...], root: Any) -> Any:
    """The pydantic ``FieldInfo`` of the key at ``loc`` under model ``root`` (:func:`_model_at`), or None."""
    model = _model_at(loc[:-1], root) if loc else None
    return model.model_fields.get(loc[-1]) if model is not None else None


_LOWER, _UPPER = (("gt", "<"), ("ge", "<=")), (("lt", "<"), ("le", "<="))
"""pydantic's bound names and how each reads in ``low < value < high``."""


def _allowed_range(loc: tuple[Any, ...], root: Any) -> str | None:
    """``"0 < value < 1"``-style bounds of the number at ``loc`` (its ``gt``/``ge``/``lt``/``le``), or None."""
    field = _field_at(loc, root)
    if field is None:
        return None
    bounds = {name: getattr(m, name) for m in field.metadata for name, _ in _LOWER + _UPPER if hasattr(m, name)}
    low = next((f"{bounds[k]} {op} " for k, op in _LOWER if k in bounds), "")
    high = next((f" {op} {bounds[k]}" for k, op in _UPPER if k in bounds), "")
    return f"{low}value{high}" if low or high else None


ERRORS_HEADER = "invalid configuration:\n  "
"""What :func:`describe_error` puts before its lines; a nested model's errors go without it."""


def describe_error(e: ValidationError, root: Any, prefix: str = "") -> str:
    """A pydantic validation error as the lines a user reads: each key path, the value found and what is
    allowed (for an unknown key: the keys allowed there).

    Args:
        e: the error raised validating ``root``.
        root: the model validated (``WinnowConfig``, or a section validated on its own).
        prefix: put before each key path (e.g. ``filter.profiles.web.``).

    Returns:
        ``"invalid configuration:"`` then one indented line per error (:data:`ERRORS_HEADER`).
    """
    lines = []
    # required keys not given, one line per parent key: parent -> (its line's index, the keys)
    missing: dict[str, tuple[int, list[str]]] = {}
    for err in e.errors():
        loc = tuple(err["loc"])
        key = prefix + ".".join(str(p) for p in loc) or "<root>"
        if err["type"] == "missing" and loc:
            parent = prefix + ".".join(str(p) for p in loc[:-1])
            if parent not in missing:
                missing[parent] = (len(lines), [])
                lines.append("")
            missing[parent][1].append(str(loc[-1]))
        elif err["type"] == "extra_forbidden":
            allowed = _allowed_keys(loc, root)
            lines.append(f"unknown config key {key!r}; allowed keys here: {allowed}")
        elif err["type"] == "value_error" and isinstance(err.get("input"), dict):
            # a section's own cross-key check: the whole section it was given is noise; its message
            # names the key when it starts with one, else the section's path does
            msg = err["msg"].removeprefix("Value error, ")
            own = msg.startswith((key.split(".")[0] + ".", "config key '", "unknown config key '"))
            lines.append(msg if own else f"config key {key!r}: {msg}")
        elif err["type"] == "list_type" and isinstance(err.get("input"), str):
            # `--set ingest.inputs=/data/x.jsonl` reads as one YAML string; say how a list is written
            lines.append(f"config key {key!r}: got {err['input']!r}: {err['msg']}; a YAML list is written "
                         f"[a, b] (--set '{key}=[{err['input']}]')")
        elif err["type"] == "model_type":
            # pydantic names the class ("instance of MixSourceConfig"), which the user never wrote
            keys = _allowed_keys((*loc, ""), root)
            lines.append(f"config key {key!r}: got {err.get('input')!r}: should be a mapping"
                         + (f" of the keys {keys}" if keys else ""))
        elif err["type"] in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
            allowed = _allowed_range(loc, root)
            lines.append(f"config key {key!r}: got {err.get('input')!r}: "
                         + (f"allowed {allowed}" if allowed else err["msg"]))
        elif err["type"] in ("bool_type", "bool_parsing"):
            lines.append(f"config key {key!r}: got {err.get('input')!r}: should be true or false")
        else:
            lines.append(f"config key {key!r}: got {err.get('input')!r}: {err['msg'].removeprefix('Value error, ')}")
    for parent, (at, keys) in missing.items():
        lines[at] = f"config key {parent!r} lacks the required keys {keys}"
    return ERRORS_HEADER + "\n  ".join(lines)

