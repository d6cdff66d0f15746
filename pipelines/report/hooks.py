"""What the report stage adds to the framework (:mod:`pipelines.core.hooks`)."""

RUNS_WITHOUT_DOCUMENTS = True
"""The report still runs after a stage of the run left no document (the stages between are not run): it
shows the funnel down to zero, what the user needs to see to change the run."""


def warm_up() -> None:
    """matplotlib on its Agg backend and the report's page module: ~0.4 s of imports the stage's figures
    need, loaded while the Spark session starts (:func:`pipelines.core.session.get_spark`)."""
    import pipelines.report.html  # noqa: F401  (imported for its side effect: loaded)
    from pipelines.core.html import pyplot

    pyplot()
