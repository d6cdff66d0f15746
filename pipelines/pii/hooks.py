"""What the pii stage adds to the framework (:mod:`pipelines.core.hooks`)."""

EMPTY_HINT = "set pii.action: redact"
"""What to change when the stage kept no document."""
