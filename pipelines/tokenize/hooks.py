"""What the tokenize stage adds to the framework (:mod:`pipelines.core.hooks`): its preflight check that
the tokenizer loads, and the ``audit`` settings that join its fingerprint."""

from __future__ import annotations

from typing import Any

from pipelines.core.config import WinnowConfig
from pipelines.core.preflight import PreflightError, when_running

EMPTY_HINT = "check tokenize.* (jobs/inspect.py --stage tokenize)"


def check_tokenizer(cfg: WinnowConfig) -> None:
    """Load the tokenizer, resolve EOS/BOS and ``tokenize.engine`` as the tokenize stage will (cached per
    process). With ``tokenize.allow_download`` the driver downloads the tokenizer here, once, as the
    stage would; better now than after ingest, dedup and filter have run.

    Raises:
        PreflightError: the message of :class:`udfs.tokenize.TokenizerError`, which names the key.
    """
    from pipelines.tokenize.stage import resolve_engine, special_ids
    from udfs.tokenize import TokenizerError

    try:
        special_ids(cfg.tokenize)
        resolve_engine(cfg.tokenize)
    except TokenizerError as e:
        raise PreflightError(str(e)) from None


preflight = when_running("tokenize", check_tokenizer)
"""The preflight hook: :func:`check_tokenizer` when tokenize runs."""


def fingerprint_keys(config: dict[str, Any]) -> dict[str, Any]:
    """The ``audit`` settings that change what the tokenize stage writes: with ``audit.inline`` (the
    default) the stage writes ``audit.json``, and every ``audit.*`` key changes it (what is sampled and
    counted, the thresholds of the findings, the prompt sets); without it, only ``audit.inline`` itself
    (turning it on makes the stage write the audit).

    Args:
        config: the whole config's plain data (``model_dump(mode="json")``, or a recorded config; a config
            recorded before the ``audit`` section has the defaults).
    """
    from pipelines.audit.config import AuditConfig

    audit = config.get("audit")
    if not isinstance(audit, dict):
        audit = AuditConfig().model_dump(mode="json")
    return {"audit": audit if audit.get("inline", True) else {"inline": False}}
