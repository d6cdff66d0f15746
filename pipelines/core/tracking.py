"""MLflow tracking of a run (``tracking.mlflow``): one MLflow run per chain run, one nested run per stage.

A stage's nested run gets params = its effective config section flattened (``dedup.threshold``) plus
``run.seed``; metrics = rows in/out, removed per reason, quarantined per reason, elapsed seconds and
every number of the stage's ``extra`` figures flattened (tokens, shard balance, shuffle quality);
tags = Winnow's version, the config and stage fingerprints and the Delta versions of the upstream
tables (``winnow.input.<table> = v3``, what :func:`pipelines.core.runs.input_state` records), so a training
run can cite exactly which data it used. The chain run gets the whole config as params, each stage's
rows out as metrics, and at the end ``report.html``, ``stats.json``, ``manifest.json`` and the effective
configs as artifacts.

**One parent for many processes** (``tracking.parent_key``): a scheduler that runs each stage as its
own process (a Databricks job: one task per stage, ``{{job.run_id}}`` as the key) would otherwise make
one parent run per task. With a key, each process looks for the run tagged ``winnow.parent_key = <key>``
in the experiment and attaches its stages to it as nested runs, creating it only when none exists;
processes that created one at the same moment converge on the earliest-created (start time, then run
id): a process that finds its own parent is not that one moves its nested runs to it and deletes its
own. The parent's params are those of its first process, later ones add the keys it lacks (MLflow
refuses a changed param value; each stage's own section is on its nested run anyway); artifacts come
from the process that ran the stage that wrote them (report, manifest), so a task never logs a report
of an earlier job run.

The tracking URI and experiment come from ``tracking.uri`` / ``tracking.experiment``, else from MLflow's
own environment (``MLFLOW_TRACKING_URI``, ``MLFLOW_EXPERIMENT_NAME``; Databricks sets them). Tracking
never fails a data run: any MLflow error prints one warning line, tracking stops for the rest of the
run, and the stage's completion record says ``tracking: failed: ...`` (``extra`` of ``_runs``).
``mlflow`` is imported only when tracking is on (the ``mlflow`` extra, or the runtime's own).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from pipelines.core.config import WinnowConfig

MAX_PARAM_CHARS = 6000
"""MLflow's limit on a param value (``MAX_PARAM_VAL_LENGTH`` in mlflow/utils/validation.py)."""

BATCH = 100
"""Params per ``log_batch`` call (MLflow's ``MAX_PARAMS_TAGS_PER_BATCH``)."""


def flatten(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Leaves of nested dicts as ``(dotted.key, value)``; lists stay values.

    >>> dict(flatten({"a": {"b": 1, "c": [1, 2]}, "d": None}))
    {'a.b': 1, 'a.c': [1, 2], 'd': None}
    """
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            yield from flatten(v, f"{prefix}{k}." if isinstance(v, Mapping) else f"{prefix}{k}")
            if isinstance(v, Mapping) and not v:
                yield f"{prefix}{k}", {}
    else:
        yield prefix.rstrip("."), obj


def numeric_leaves(obj: Any, prefix: str) -> dict[str, float]:
    """The numeric (not bool) leaves of ``obj`` as MLflow metric keys ``<prefix>.<dotted key>``.

    >>> numeric_leaves({"totals": {"tokens": 5, "name": "x"}, "ok": True}, "extra")
    {'extra.totals.tokens': 5.0}
    """
    return {_key(f"{prefix}.{k}"): float(v) for k, v in flatten(obj)
            if isinstance(v, int | float) and not isinstance(v, bool)}


def _key(k: str) -> str:
    # MLflow keys allow alphanumerics, _ - . space / (mlflow/utils/validation.py); reason ids fit already.
    return "".join(c if c.isalnum() or c in "_-. /" else "_" for c in k)


def _param_value(v: Any) -> str:
    return str(v)[:MAX_PARAM_CHARS]


class Tracker:
    """MLflow tracking of one chain run; does nothing when ``tracking.mlflow`` is off.

    Args:
        cfg: the run's config.
        warn: callable taking one warning line (default: print to stderr).
    """

    def __init__(self, cfg: WinnowConfig, warn: Callable[[str], None] | None = None) -> None:
        self.cfg = cfg
        self.status = "ok" if cfg.tracking.mlflow else "off"
        self._warn = warn or _stderr
        self.client: Any = None
        """The ``MlflowClient`` once :meth:`start` succeeded (jobs beside the chain log through it too)."""
        self.experiment_id: str | None = None
        self.run_id: str | None = None
        self._stages: list[str] = []
        self._children: list[str] = []
        self._parent_metrics: dict[str, float] = {}

    @property
    def active(self) -> bool:
        """Tracking is on and nothing has failed so far."""
        return self.status == "ok"

    def fail(self, what: str, err: BaseException) -> None:
        """Stop tracking after ``err`` while doing ``what``: one warning line, :attr:`status` says why."""
        first = str(err).splitlines()[0][:200] if str(err) else ""
        self.status = f"failed: {what}: {type(err).__name__}: {first}"
        self._warn(f"winnow: warning: MLflow tracking {what} failed ({type(err).__name__}: {first}); "
                   "the run goes on without tracking")

    def start(self, stages: list[str]) -> None:
        """Create the chain's MLflow run (experiment created when missing) with the whole config as params."""
        if not self.active:
            return
        try:
            # One attempt, a short timeout: an unreachable server must cost seconds, not MLflow's
            # default minutes of retries with backoff. Explicit settings in the environment win.
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(int(self.cfg.tracking.timeout_s)))
            import mlflow
            from mlflow.tracking import MlflowClient

            t = self.cfg.tracking
            uri = t.uri or mlflow.get_tracking_uri()
            if uri.startswith("file:"):
                # MLflow 3 refuses its file store (in maintenance) unless allowed; a file: URI in the
                # config is an explicit choice.
                os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            self.client = MlflowClient(tracking_uri=uri)
            name = t.experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME") or "winnow"
            exp = self.client.get_experiment_by_name(name)
            self.experiment_id = exp.experiment_id if exp else self.client.create_experiment(name)
            params = dict(flatten(self.cfg.model_dump(mode="json")))
            key = t.parent_key
            found = self._parents(key) if key else []
            if found:
                self.run_id = found[0].info.run_id
                self.client.update_run(self.run_id, status="RUNNING")
                have = found[0].data.params
                self.log(self.run_id, params={k: v for k, v in params.items() if _key(k) not in have})
                return
            tags = self.tags(**({"winnow.parent_key": key} if key else {}))
            name = f"winnow job run {key}" if key else f"winnow {'+'.join(stages)}"
            run = self.client.create_run(self.experiment_id, tags=tags, run_name=name)
            self.run_id = run.info.run_id
            self.log(self.run_id, params=params)
            if key:
                self._converge()
        except Exception as e:  # noqa: BLE001 - tracking must never stop the data run
            self.fail("start", e)

    def _parents(self, key: str) -> list[Any]:
        """The live runs tagged ``winnow.parent_key = key``, earliest created first (ties: run id)."""
        # The key's pattern (config) has no quote: it cannot break out of the filter's string.
        where = f"tags.`winnow.parent_key` = '{key}'"
        runs = self.client.search_runs([self.experiment_id], filter_string=where, max_results=100)
        return sorted(runs, key=lambda r: (r.info.start_time, r.info.run_id))

    def _converge(self) -> None:
        """Make :attr:`run_id` the earliest parent of the key: another process may have created one at
        the same moment (parallel tasks); if so, move this process's nested runs under it and delete
        the parent this process created."""
        found = self._parents(self.cfg.tracking.parent_key)
        if not found or found[0].info.run_id == self.run_id:
            return
        mine, self.run_id = self.run_id, found[0].info.run_id
        for child in self._children:
            self.client.set_tag(child, "mlflow.parentRunId", self.run_id)
        self.log(self.run_id, metrics=self._parent_metrics)
        if any(r.info.run_id == mine for r in found):
            self.client.delete_run(mine)

    def tags(self, **extra: str) -> dict[str, str]:
        """The tags of every Winnow run (version, config fingerprint, run root) plus ``extra``."""
        from importlib.metadata import PackageNotFoundError, version

        try:
            ver = version("winnow")
        except PackageNotFoundError:
            ver = "unknown"
        return {"winnow.version": ver, "winnow.config_fingerprint": self.cfg.fingerprint(),
                "winnow.run_root": self.cfg.run.root, **extra}

    def log(self, run_id: str, params: Mapping[str, Any] = (), metrics: Mapping[str, float] = (),
             tags: Mapping[str, str] = ()) -> None:
        """Log ``params``, ``metrics`` (at step 0) and ``tags`` to MLflow run ``run_id``, in batches of
        :data:`BATCH` (keys made MLflow-safe, param values cut to :data:`MAX_PARAM_CHARS`)."""
        import time

        from mlflow.entities import Metric, Param, RunTag

        now = int(time.time() * 1000)
        ps = [Param(_key(k), _param_value(v)) for k, v in dict(params).items()]
        ms = [Metric(_key(k), float(v), now, 0) for k, v in dict(metrics).items()]
        ts = [RunTag(k, str(v)) for k, v in dict(tags).items()]
        for i in range(0, max(len(ps), len(ms), len(ts)), BATCH):
            self.client.log_batch(run_id, metrics=ms[i:i + BATCH], params=ps[i:i + BATCH],
                                   tags=ts[i:i + BATCH])

    def log_stage(self, report: Any, inputs: Mapping[str, str]) -> str:
        """Log one finished stage as a nested run of the chain's run.

        Args:
            report: the stage's :class:`~pipelines.core.runner.StageReport`.
            inputs: its upstream state (:func:`pipelines.core.runs.input_state`), logged as tags.

        Returns:
            The tracking status for the completion record: ``ok``, ``off`` or ``failed: ...``.
        """
        if not self.active:
            return self.status
        stage = report.stage
        try:
            section = getattr(self.cfg, stage).model_dump(mode="json")
            params = {"run.seed": self.cfg.run.seed, **dict(flatten(section, f"{stage}."))}
            metrics = {"rows_in": report.rows_in, "rows_out": report.rows_out, "removed": report.n_removed,
                       "elapsed_s": report.elapsed_s,
                       **{f"removed.{k}": v for k, v in report.removed.items()},
                       **{f"quarantined.{k}": v for k, v in report.quarantined.items()},
                       **numeric_leaves(report.extra, "extra")}
            tags = self.tags(**{"mlflow.parentRunId": self.run_id, "winnow.stage": stage,
                                 "winnow.stage_fingerprint": self.cfg.stage_fingerprint(stage)},
                              **{f"winnow.input.{k}": v for k, v in sorted(inputs.items())})
            run = self.client.create_run(self.experiment_id, run_name=stage, tags=tags)
            self._children.append(run.info.run_id)
            self.log(run.info.run_id, params=params, metrics=metrics)
            self.client.set_terminated(run.info.run_id, "FINISHED")
            mine = {f"{stage}.rows_out": report.rows_out, f"{stage}.elapsed_s": report.elapsed_s}
            self._parent_metrics.update(mine)
            self.log(self.run_id, metrics=mine)
            self._stages.append(stage)
        except Exception as e:  # noqa: BLE001
            self.fail(f"logging stage {stage}", e)
        return self.status

    def finish(self, spark: Any, failed: bool = False) -> None:
        """Log the artifacts (report, stats, manifest, effective configs) and end the chain's run."""
        if not self.active:
            return
        from pipelines.core.chain import MANIFEST, STATS
        from pipelines.core.tables import read_bytes

        cfg = self.cfg
        keyed = bool(cfg.tracking.parent_key)
        # A keyed parent is shared by many processes: each logs only the files its own stages wrote, or
        # a task would attach the report of an earlier job run at the same root.
        files = {f"config/{s}.json": f"{cfg.config_path}/{s}.json" for s in self._stages}
        if not keyed or "report" in self._stages:
            files |= {"report/report.html": f"{cfg.report_path}/report.html",
                      f"report/{STATS}": f"{cfg.report_path}/{STATS}"}
        if not keyed or "shard" in self._stages:
            files[f"shards/{MANIFEST}"] = f"{cfg.shard_root.rstrip('/')}/{MANIFEST}"
        try:
            if keyed:
                self._converge()
            with tempfile.TemporaryDirectory() as tmp:
                for name, path in files.items():
                    data = read_bytes(spark, path, cfg)
                    if data is None:
                        continue
                    local = os.path.join(tmp, name)
                    os.makedirs(os.path.dirname(local), exist_ok=True)
                    with open(local, "wb") as f:
                        f.write(data)
                self.client.log_artifacts(self.run_id, tmp)
            self.client.set_terminated(self.run_id, "FAILED" if failed else "FINISHED")
        except Exception as e:  # noqa: BLE001
            self.fail("finish", e)


def _stderr(line: str) -> None:
    import sys

    print(line, file=sys.stderr, flush=True)
