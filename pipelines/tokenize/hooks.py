"""What the tokenize stage adds to the framework (:mod:`pipelines.core.hooks`): its preflight check that
the tokenizer loads."""

from __future__ import annotations

from collections.abc import Sequence

from pipelines.core.config import WinnowConfig
from pipelines.core.preflight import PreflightError

EMPTY_HINT = "check tokenize.* (jobs/inspect.py --stage tokenize)"


def preflight(cfg: WinnowConfig, stages: Sequence[str]) -> None:
    """A run with tokenize: :func:`check_tokenizer`. With ``tokenize.allow_download`` the driver
    downloads the tokenizer here, once, as the stage would; better now than after ingest, dedup and
    filter have run."""
    if "tokenize" in stages:
        check_tokenizer(cfg)


def check_tokenizer(cfg: WinnowConfig) -> None:
    """Load the tokenizer, resolve EOS/BOS and ``tokenize.engine`` as the tokenize stage will (cached per
    process).

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
