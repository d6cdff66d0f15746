"""What the dedup stage adds to the framework (:mod:`pipelines.core.hooks`)."""

EMPTY_HINT = "check dedup.threshold"
"""What to change when the stage kept no document."""
