"""verify lists a broken or foreign manifest as a problem instead of raising (no Spark needed)."""

from __future__ import annotations

import pytest

from pipelines.tools.verify import verify


@pytest.mark.parametrize("text, expected", [
    (None, "cannot read"),
    ("{not json", "cannot read"),
    ("{}", "keys ['dtype', 'tokenizer', 'seq_len', 'files', 'formats', 'totals'] missing"),
    ("[1, 2]", "is not a Winnow manifest"),
])
def test_bad_manifest_is_a_problem_not_a_crash(tmp_path, text, expected):
    if text is not None:
        (tmp_path / "manifest.json").write_text(text)
    res = verify(str(tmp_path))
    assert not res.ok and len(res.problems) == 1 and expected in res.problems[0]
