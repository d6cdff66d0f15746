"""What the report stage adds to the framework (:mod:`pipelines.core.hooks`)."""

RUNS_WITHOUT_DOCUMENTS = True
"""The report still runs after a stage of the run left no document (the stages between are not run): it
shows the funnel down to zero, what the user needs to see to change the run."""
