"""Filter profiles on the shared real samples (the profiles' measured goals); skipped when the shared folder is absent.

Measured (bench/filter_profiles.py): scientific 29/31 kept under ``science`` (2212.11739 is 88 characters of
LaTeX residue, 2212.11867 repeats paragraphs); DCLM human labels under ``web``: precision 0.7165, recall
0.6947 of "kept" (datatrove word reading, the web profile's).
"""

from __future__ import annotations

import pytest

from bench import filter_profiles as fp


@pytest.mark.slow
def test_science_profile_keeps_real_papers(shared_data):
    docs = fp.science_docs(shared_data)
    rs = dict(zip(docs, fp.judge(list(docs.values()), "science"), strict=True))
    removed = {k for k, r in rs.items() if r}
    assert removed <= {"2212.11739", "2212.11867"}, {k: rs[k] for k in removed}
    web = fp.judge(list(docs.values()), "web")
    assert sum(1 for r in web if not r) < len(docs) - len(removed)  # the profile is what keeps them


@pytest.mark.slow
def test_wiki_profile_quality_removals_are_tables_lists_and_stubs(shared_data):
    docs = fp.wiki_docs(shared_data)
    rs = dict(zip(docs, fp.judge(list(docs.values()), "wiki"), strict=True))
    quality = {k for k, r in rs.items() if r and not any(x.startswith("lang.") for x in r)}
    assert quality <= {"2008-British-motorcycle-Grand-Prix", "Bradley-(community),-Lincoln-County,-Wisconsin",
                       "Britt-Morgan", "Teymanak-e-Olya", "bluejays", "earthquakes", "list", "washington-nationals"}


@pytest.mark.slow
def test_dclm_precision_recall_of_web_do_not_fall(shared_data):
    docs = fp.dclm_docs(shared_data)
    pr = fp.precision_recall([d["label"] for d in docs], [not r for r in fp.judge([d["text"] for d in docs], "web")])
    assert pr["precision"] >= 0.7165 and pr["recall"] >= 0.6947, pr
