"""What the tokenize stage adds to the framework (:mod:`pipelines.core.hooks`): its preflight check that
the tokenizer loads."""

from __future__ import annotations

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
