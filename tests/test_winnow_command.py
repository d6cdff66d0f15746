"""The `winnow` command (jobs/winnow.py): help lists commands and stages, subcommands reach the jobs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jobs import _cli, winnow
from pipelines.core.chain import CHAIN

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _command_name_cleared():
    """winnow.main names the job after the command typed, for the rest of the process: as a console
    script it runs one command, here several in one process."""
    yield
    _cli._CALLED_AS.clear()


def test_help_lists_every_stage_in_one_line_each():
    r = subprocess.run([sys.executable, "-m", "jobs.winnow", "--help"], capture_output=True, text=True, cwd=REPO,
                       timeout=60)
    assert r.returncode == 0
    commands, stages = r.stdout.split("\nstages (pipelines/core/chain.py, in chain order):\n")
    lines = commands.splitlines()
    assert [line.split()[0] for line in stages.splitlines()] == [s.name for s in CHAIN]
    for s, line in zip(CHAIN, stages.splitlines(), strict=True):
        assert s.summary, f"stage {s.name} has no summary in pipelines/core/chain.py"
        assert line.endswith(s.summary)
    for cmd in ("run", "plan", "stage", "inspect", "verify", "report", "export"):
        assert any(line.startswith(f"  {cmd} ") for line in lines), cmd


def test_console_script_is_declared():
    text = (REPO / "pyproject.toml").read_text()
    assert 'winnow = "jobs.winnow:main"' in text


def test_bad_use_exits_2(capsys):
    assert winnow.main([]) == 2
    assert winnow.main(["frobnicate"]) == 2
    assert "unknown command 'frobnicate'" in capsys.readouterr().err
    assert winnow.main(["stage", "nope"]) == 2
    assert "one of ['ingest'" in capsys.readouterr().err


def test_stage_help_lists_the_stages(capsys):
    assert winnow.main(["stage", "--help"]) == 0  # was exit 2, "give a stage name ... (got '--help')"
    out = capsys.readouterr().out
    assert out.startswith("usage: winnow stage NAME")
    assert [line.split()[0] for line in out.split("in chain order):\n")[1].splitlines()] == [s.name for s in CHAIN]
    ingest = CHAIN[0].summary  # the formats named are the ones ingest reads (README's format table)
    assert all(f in ingest for f in ("JSONL", "JSON,", "CSV/TSV", "Parquet", "WET/WARC", "JATS", "LaTeX", "MediaWiki"))


def test_bad_config_exits_2_before_spark():
    r = subprocess.run([sys.executable, "-m", "jobs.winnow", "stage", "filter", "--set", "run.seed=-1"],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 2 and "run.seed" in r.stderr
    # the lines name the command typed, not the script it calls (stage -> jobs/filter.py, run -> pipeline.py)
    assert r.stderr.startswith("winnow stage filter: ")
    r = subprocess.run([sys.executable, "-m", "jobs.winnow", "run", "--set", "run.seed=-1"],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 2 and r.stderr.startswith("winnow run: ")


def test_plan_is_run_dry_run_and_stage_runs_one_stage(spark, tmp_path, capsys):
    from pipelines.core import tables
    from pipelines.core.config import load_config
    from pipelines.core.runs import latest_records

    root = tmp_path / "run"
    cfg = load_config(overrides=[f"run.root={root}", "report.samples_per_reason=0"])
    df = spark.createDataFrame([("d0", "one two three")], "doc_id string, text string")
    tables.write_table(df, cfg, "documents")
    common = ["--set", f"run.root={root}", "--set", "pipeline.stages=[report]", "--set", "report.samples_per_reason=0",
              "--set", "spark.shuffle_partitions=4"]
    assert winnow.main(["plan", *common]) == 0
    assert "  report    run   no completion record" in capsys.readouterr().out
    assert latest_records(spark, cfg) == {}  # plan ran nothing
    assert winnow.main(["report", *common]) == 0
    assert "[report] in=1 out=1" in capsys.readouterr().out
    assert winnow.main(["plan", *common]) == 0
    assert "  report    skip  up to date" in capsys.readouterr().out
