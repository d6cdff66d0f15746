"""The auto profile and LID agreeing with its shares on the shared real samples (their measured goals);
skipped when the shared folder is absent.

Measured (bench/auto_profile.py, bench/langid_shares.py): 1,157 of 1,158 documents get the profile a
person gives them; auto keeps the 49 Wikipedia pages ``wiki`` keeps and the 29 papers ``science`` keeps; the 10 English-majority Common Crawl pages the sample labelled as another language are ``en``
(shares of the sample's slices; of every prose line when ``filter.langid.topk_max_chars`` is set: 15).
"""

from __future__ import annotations

import pytest

from bench import auto_profile as ap
from bench import langid_shares as ls


@pytest.mark.slow
def test_auto_profile_agrees_with_a_person_and_keeps_what_the_own_profiles_keep(shared_data):
    res = ap.run(shared_data)
    assert res["agreement.all"]["share"] >= 0.95, res["agreement.all"]
    assert res["agreement.wikipedia"]["agree"] == res["agreement.wikipedia"]["n"]
    assert res["agreement.web_crawl"]["disagree"] == {}
    wiki, sci = res["kept.wikipedia"], res["kept.scientific"]
    assert wiki["auto"] == wiki["wiki"] and wiki["differ"] == {}, wiki
    assert sci["auto"] == sci["science"] and sci["differ"] == {}, sci


@pytest.mark.slow
def test_english_majority_pages_are_english(shared_data):
    res = ls.run(shared_data)
    pages = res["web_crawl_english_majority_labelled_other"]
    assert pages["n"] >= 10 and pages["lang_en_after"] == pages["n"], pages
    assert res["lingua_sentences"]["after"] >= res["lingua_sentences"]["before"]
    assert res["lingua_sentences"]["languages_changed"] == {}
