"""What the passages stage adds to the framework (:mod:`pipelines.core.hooks`)."""

EMPTY_HINT = "raise passages.min_chars or set passages.enabled: false"
"""What to change when the stage kept no document."""
