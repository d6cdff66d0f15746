"""A tiny end-to-end gate through jobs/gate.py (small model, few steps): outputs, determinism, bad inputs."""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.gate import main
from tests.gate_shards import make_variant, random_docs

REPO = Path(__file__).resolve().parents[1]
TINY = ["gate.tokens=1024", "gate.seq_len=16", "gate.batch_size=8", "gate.seeds=2", "gate.vocab_size=64",
        "gate.model.d_model=32", "gate.model.n_layers=1", "gate.model.n_heads=2", "gate.eval_max_tokens=256",
        "gate.progress_s=0", "gate.wavy_smooth_steps=3"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gate")
    make_variant(tmp / "base", random_docs(60, seed=1), validation=6)
    make_variant(tmp / "other", random_docs(60, seed=2, high=300), validation=6)
    evals = tmp / "quiz.jsonl"
    evals.write_text("\n".join(json.dumps({"q": f"question {i} about the harbour", "choices": ["yes", "no"],
                                           "answer": i % 2}) for i in range(4)) + "\n")
    (tmp / "ref").mkdir()
    (tmp / "ref" / "a.txt").write_text("The harbour froze in the eleventh winter.\n")
    return tmp


def args(tmp: Path, out: str, *more: str) -> list[str]:
    sets = f"gate.eval_sets=[{{name: quiz, paths: [{tmp / 'quiz.jsonl'}], fields: [q], choices: choices, answer: answer}}]"
    flags = [x for kv in [*TINY, sets, f"gate.reference={tmp / 'ref'}", *more] for x in ("--set", kv)]
    return ["--variant", str(tmp / "base"), "--variant", str(tmp / "other"), "--out", str(tmp / out), *flags]


def figures(path: Path) -> dict:
    r = json.loads(path.read_text())
    return {k: v for k, v in r.items() if k != "speed"}


def test_tiny_gate_writes_every_figure_and_is_deterministic(runs, capsys):
    assert main(args(runs, "g1")) == 0
    out = capsys.readouterr().out
    assert "[gate] base seed 1/2: step 8/8, loss" in out and "tokens/s" in out
    assert "[gate] other vs base:" in out and "[gate] wrote" in out and "[gate] The bigram proxy agreed" in out
    r = json.loads((runs / "g1" / "gate.json").read_text())
    sets = {s["name"] for s in r["eval_sets"]}
    assert sets == {"eval:quiz", "validation:base", "validation:other", "reference"}
    assert set(r["bits_per_byte"]["other"]) == sets and len(r["bits_per_byte"]["other"]["eval:quiz"]) == 2
    assert r["accuracy"]["base"]["eval:quiz"][0] in (0.0, 0.25, 0.5, 0.75, 1.0)
    c = r["comparisons"]["other"]
    assert c["validation:other"]["ranked"] is False and c["validation:base"]["ranked"] is False
    assert c["eval:quiz"]["ranked"] is True and c["eval:quiz"]["verdict"] in ("better", "worse", "no_difference")
    assert r["budget"]["steps"] == 8 and len(r["loss_curves"]["base"]) == 2 and len(r["loss_curves"]["base"][0]) == 8
    assert set(r["wavy"]) == {"base", "other"} and r["agreement"]["pairs"] == 4
    assert r["vocab"]["compact_size"] == 64 and 0 < r["speed"]["mfu"]
    assert "<svg" in (runs / "g1" / "gate.html").read_text() or "data:image" in (runs / "g1" / "gate.html").read_text()
    html = (runs / "g1" / "gate.html").read_text()
    assert "The bigram proxy agreed with the transformer tier on the sign of the difference in" in html
    assert "{&#x27;pairs&#x27;" not in html and "{'pairs'" not in html
    assert not (runs / "g1" / "_lock.json").exists()  # the gate root's lock is released
    # the same gate in another process: byte-identical figures (timings apart)
    r2 = subprocess.run([sys.executable, str(REPO / "jobs" / "gate.py"), *args(runs, "g2")], capture_output=True,
                        text=True, cwd=REPO, timeout=300)
    assert r2.returncode == 0, r2.stderr
    assert figures(runs / "g1" / "gate.json") == figures(runs / "g2" / "gate.json")


@pytest.mark.parametrize(("more", "message"), [
    (["gate.tokens=100000"], "gate.tokens=100000: variant"),
    (["gate.reference=/nonexistent/ref"], "gate.reference='/nonexistent/ref'"),
])
def test_bad_inputs_exit_1_with_one_line(runs, capsys, more, message):
    assert main(args(runs, "bad", *more)) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_unwritable_gate_root_exits_1_before_training(runs, capsys):
    (runs / "afile").write_text("not a folder")
    assert main(args(runs, "afile/g")) == 1
    cap = capsys.readouterr()
    assert "gate.output=" in cap.err and "cannot write there" in cap.err and cap.err.count("\n") == 1
    assert "step" not in cap.out  # nothing was trained


def test_eval_set_without_text_names_the_key(runs, capsys):
    (runs / "blank.jsonl").write_text('{"q": ""}\n')
    bad = f"gate.eval_sets=[{{name: blank, paths: [{runs / 'blank.jsonl'}], fields: [q]}}]"
    assert main([*args(runs, "bad"), "--set", bad]) == 1
    err = capsys.readouterr().err
    assert "gate.eval_sets" in err and "'blank'" in err and "no item with text" in err


def test_variant_without_shards_exits_1_without_traceback(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "jobs" / "gate.py"), "--variant", str(tmp_path),
                        "--variant", str(tmp_path)], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 1 and "no manifest.json in" in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1


def _one_line_exit_2(argv: list[str], capsys, *fragments: str) -> None:
    assert main(argv) == 2
    cap = capsys.readouterr()
    assert all(f in cap.err for f in fragments), cap.err
    assert cap.err.count("\n") == 1 and "Traceback" not in cap.err and "step" not in cap.out


def test_fewer_than_two_variants_is_a_usage_error(runs, capsys):
    _one_line_exit_2(["--variant", str(runs / "base"), "--out", str(runs / "one")], capsys,
                     "gate.variants: give two or more variants")
    assert not (runs / "one").exists()


def test_one_variant_given_twice_is_a_usage_error(runs, capsys):
    _one_line_exit_2(["--variant", str(runs / "base"), "--variant", str(runs / "base" / "shards"), "--out",
                      str(runs / "twice")], capsys, "are the same shard set", "give each variant once")


def test_gate_root_held_by_another_gate_exits_2_naming_it(runs, capsys):
    held = runs / "held"
    held.mkdir()
    now = dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()
    (held / "_lock.json").write_text(json.dumps({"owner": "ana", "host": socket.gethostname(), "pid": os.getpid(),
                                                 "started_at": now, "heartbeat_at": now, "token": "t",
                                                 "command": "gate.py --out held"}))
    _one_line_exit_2(args(runs, "held"), capsys, f"gate root {held} is in use by another gate: pid {os.getpid()}",
                     "gate.py --out held", "--force-unlock")
    assert json.loads((held / "_lock.json").read_text())["token"] == "t"  # the other gate's lock is kept


def test_bad_gate_config_exits_2_naming_the_key(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--set", "gate.order=random"])
    assert e.value.code == 2 and "gate.order" in capsys.readouterr().err


def test_without_jax_it_says_how_to_install_the_extra_from_this_checkout(capsys, monkeypatch):
    # It said "pip install 'winnow[gate]'": "winnow" on PyPI is another project.
    monkeypatch.setitem(sys.modules, "jax", None)
    with pytest.raises(SystemExit) as e:
        main(["--variant", "a", "--variant", "b"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1
    assert err.endswith("install the gate extra from the Winnow checkout, .venv/bin/pip install -e '.[gate]' "
                        "(make test does)\n")
