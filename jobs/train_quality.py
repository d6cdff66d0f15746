"""Train the fastText quality classifier used by the filter stage (``filter.quality_model.model``).

``python jobs/train_quality.py --positive hq.jsonl --negative web.jsonl --out models/quality.bin``, or one
labelled file: ``--labelled data.jsonl --label-field label`` (truthy = high quality). Writes the model and
``<out>.metrics.json`` (held-out accuracy, precision, recall, AUC).
"""

import argparse
import json
import os
import sys

if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path[0] = os.path.dirname(sys.path[0])


def main(argv=None) -> int:
    """Train the fastText quality classifier from labelled JSONL; returns the exit status."""
    from pipelines.tools.train_quality import read_jsonl, train

    p = argparse.ArgumentParser(prog="train_quality.py", description=__doc__.splitlines()[0])
    p.add_argument("--positive", help="JSONL of high-quality examples")
    p.add_argument("--negative", help="JSONL of random web examples")
    p.add_argument("--labelled", help="one JSONL with a label field instead of --positive/--negative")
    p.add_argument("--label-field", default="label")
    p.add_argument("--text-field", default="text")
    p.add_argument("--out", required=True, help="model path (.bin)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--holdout", type=float, default=0.2)
    a = p.parse_args(argv)
    if a.labelled:
        rows = read_jsonl(a.labelled, a.text_field)
        texts, pos = [r[a.text_field] for r in rows], [bool(int(r[a.label_field])) for r in rows]
    elif a.positive and a.negative:
        good, bad = read_jsonl(a.positive, a.text_field), read_jsonl(a.negative, a.text_field)
        texts, pos = [r[a.text_field] for r in good + bad], [True] * len(good) + [False] * len(bad)
    else:
        p.exit(2, "train_quality.py: give --labelled, or both --positive and --negative\n")
    metrics = train(texts, pos, a.out, seed=a.seed, holdout=a.holdout)
    print(json.dumps(metrics, sort_keys=True))
    if "best_f1_min_score" in metrics:
        print(f"held-out: {metrics['kept_at_0.5']:.0%} of documents score >= 0.5; set "
              f"filter.quality_model.min_score={metrics['best_f1_min_score']} (best F1 {metrics['best_f1']}) or "
              f"{metrics['keep_fraction_min_score']['0.1']} to keep the top 10%", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
