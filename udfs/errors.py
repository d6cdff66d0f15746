"""The one error marker both layers share: :class:`UserError`, "the user must change something".

An error class that means "fix the input, the config or the order of the stages" (a missing table, an
input glob that matches nothing, dedup signature settings that differ from the reference, a tokenizer
that does not load, a bad config value) also derives from :class:`UserError`. ``jobs/_cli.py`` prints
such an error's message without a traceback (``WINNOW_TRACEBACK=1`` shows it) and exits non-zero;
anything else is a bug and keeps its traceback. It lives in ``udfs/`` so that pure code (the tokenizer
loader) can raise it without importing ``pipelines/``.
"""


class UserError(Exception):
    """Marker base: the message says what the user must change; no traceback is needed to act on it."""
