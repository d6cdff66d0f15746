"""What the refs stage adds to the framework (:mod:`pipelines.core.hooks`)."""

EMPTY_HINT = "set refs.policy: flag or raise refs.max_dangling"
"""What to change when the stage kept no document."""
