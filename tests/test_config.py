"""Config loading, validation messages, overrides, fingerprints and conf/default.yaml parity."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from pipelines.core.config import ConfigError, WinnowConfig, load_config, parse_override

REPO = Path(__file__).resolve().parents[1]
DEFAULT_YAML = REPO / "conf" / "default.yaml"


def test_default_yaml_equals_model_defaults():
    data = yaml.safe_load(DEFAULT_YAML.read_text())
    assert WinnowConfig.model_validate(data).model_dump() == WinnowConfig().model_dump()
    # and the other way round: every model key appears in the YAML
    assert data == WinnowConfig().model_dump(mode="json")


def test_every_default_yaml_key_has_a_comment():
    lines = DEFAULT_YAML.read_text().splitlines()
    undocumented = []
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)([A-Za-z_][\w]*):", line)
        if not m:
            continue
        prev = lines[i - 1].strip() if i else ""
        if "#" not in line and not prev.startswith("#"):
            undocumented.append(line.strip())
    assert undocumented == []


def test_local_yaml_is_valid():
    cfg = load_config([REPO / "conf" / "local.yaml"])
    assert cfg.spark.shuffle_partitions == 8


def test_override_values_are_yaml():
    cfg = load_config(overrides=["ingest.inputs=[a.jsonl, b/*.wet.gz]", "run.seed=7", "spark.master=local[1]"])
    assert cfg.ingest.inputs == ["a.jsonl", "b/*.wet.gz"]
    assert cfg.run.seed == 7
    assert cfg.spark.master == "local[1]"


def test_a_config_file_not_utf8_or_a_folder_is_a_config_error(tmp_path):
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes(b"# caf\xe9\nrun: {seed: 1}\n")
    with pytest.raises(ConfigError, match=r"latin1.yaml' is not UTF-8 text \(byte 0xe9 at offset 5\)"):
        load_config([latin1])
    with pytest.raises(ConfigError, match=r"is a folder; give a YAML file"):
        load_config([tmp_path])


def test_spark_conf_numbers_and_booleans_become_spark_strings_and_sizes_are_checked():
    cfg = load_config(overrides=["spark.conf={spark.sql.shuffle.partitions: 8, spark.sql.adaptive.enabled: true}"])
    assert cfg.spark.conf == {"spark.sql.shuffle.partitions": "8", "spark.sql.adaptive.enabled": "true"}
    assert load_config(overrides=["spark.conf={spark.driver.memory: 4g}"]).spark.conf["spark.driver.memory"] == "4g"
    with pytest.raises(ConfigError, match=r"spark.conf.spark.driver.memory='lots': allowed: a size"):
        load_config(overrides=["spark.conf={spark.driver.memory: lots}"])


def test_spark_file_partition_bytes_is_a_size_and_a_tiny_one_draws_one_warning_line():
    from pipelines.core.section import byte_size, small_partitions_line

    with pytest.raises(ConfigError, match=r"spark.conf.spark.sql.files.maxPartitionBytes='lots': allowed: a size"):
        load_config(overrides=["spark.conf={spark.sql.files.maxPartitionBytes: lots}"])
    with pytest.raises(ConfigError, match=r"maxPartitionBytes='0': allowed: a size in bytes > 0"):
        load_config(overrides=["spark.conf={spark.sql.files.maxPartitionBytes: 0}"])
    cfg = load_config(overrides=["spark.conf={spark.sql.files.maxPartitionBytes: 1k}"])
    (line,) = small_partitions_line(cfg.spark.conf).splitlines()
    assert "spark.conf.spark.sql.files.maxPartitionBytes='1k'" in line and "use at least 1m" in line
    # just at the floor, and Spark's default, draw none
    assert small_partitions_line({"spark.sql.files.maxPartitionBytes": "1048576"}) is None
    assert small_partitions_line({"spark.sql.files.maxPartitionBytes": "1023k"}) is not None
    assert small_partitions_line({}) is None
    assert (byte_size("128m"), byte_size("2GB"), byte_size("1.5m")) == (128 << 20, 2 << 30, None)


def test_a_string_where_a_list_belongs_says_how_a_list_is_written():
    with pytest.raises(ConfigError, match=r"'ingest.inputs': got '/data/x.jsonl': .*list.*"
                                          r"--set 'ingest.inputs=\[/data/x.jsonl\]'"):
        load_config(overrides=["ingest.inputs=/data/x.jsonl"])


def test_ingest_byte_keys_take_sizes_as_spark_writes_them():
    cfg = load_config(overrides=["ingest.split_bytes=64m", "ingest.batch_bytes=32MB", "ingest.max_doc_bytes=4096"])
    assert (cfg.ingest.split_bytes, cfg.ingest.batch_bytes, cfg.ingest.max_doc_bytes) == (64 << 20, 32 << 20, 4096)
    with pytest.raises(ConfigError, match=r"'ingest.split_bytes': got 'lots': allowed: a number of bytes or a size"):
        load_config(overrides=["ingest.split_bytes=lots"])
    with pytest.raises(ConfigError, match=r"'ingest.batch_bytes': got 4294967296: allowed 1024 <= value < 2147483648"):
        load_config(overrides=["ingest.batch_bytes=4g"])


def test_exponents_are_numbers_as_in_yaml_1_2(tmp_path):
    # PyYAML (YAML 1.1) reads 1e9 as a string: an integer key then said "not a valid integer"
    f = tmp_path / "c.yaml"
    f.write_text("ingest: {split_bytes: 1e9}\n")
    cfg = load_config([f], ["ingest.max_quarantine_fraction=25e-2"])
    assert (cfg.ingest.split_bytes, cfg.ingest.max_quarantine_fraction) == (10**9, 0.25)
    with pytest.raises(ConfigError, match=r"'ingest.split_bytes': got 1.5: .*fractional part"):
        load_config(overrides=["ingest.split_bytes=1.5e0"])


def test_a_key_given_twice_in_one_file_is_an_error_naming_it(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("run:\n  seed: 1\n  seed: 2\n")
    with pytest.raises(ConfigError, match=r"(?s)c\.yaml' is not valid YAML.*key 'seed' is given twice.*line 3"):
        load_config([f])
    # YAML merge keys still work: the keys beside `<<` override the merged ones
    f.write_text("defaults: &d {seed: 1, root: out}\nrun: {<<: *d, seed: 3}\n")
    with pytest.raises(ConfigError, match=r"unknown config key 'defaults'"):
        load_config([f])


@pytest.mark.parametrize(("text", "line"), [
    ("dedup:\n\tthreshold: 0.7\n", "found character '\\t' that cannot start any token at line 2, column 1; YAML "
                                    "indents with spaces, not tabs"),
    ("dedup: [0.7\n", "expected ',' or ']', but got '<stream end>' at line 2, column 1"),
])
def test_a_yaml_error_is_one_line_with_its_place(tmp_path, text, line):
    # PyYAML's text took five lines, with a caret under a copy of the line, and called the file "<unicode string>".
    f = tmp_path / "c.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config([f])
    assert str(e.value) == f"config file {str(f)!r} is not valid YAML: {line}"


def test_files_merge_later_wins(tmp_path):
    a = tmp_path / "a.yaml"
    b = tmp_path / "b.yaml"
    a.write_text("run: {root: x, seed: 1}\nspark: {conf: {k1: v1}}\n")
    b.write_text("run: {seed: 2}\nspark: {conf: {k2: v2}}\n")
    cfg = load_config([a, b], ["run.seed=3"])
    assert (cfg.run.root, cfg.run.seed) == ("x", 3)
    assert cfg.spark.conf == {"k1": "v1", "k2": "v2"}


def test_unknown_key_names_path_and_allowed_keys():
    with pytest.raises(ConfigError, match=r"unknown config key 'ingest.fromat'.*'format'"):
        load_config(overrides=["ingest.fromat=jsonl"])


@pytest.mark.parametrize(("override", "key", "allowed"), [
    # a typo inside a dict of sections (the user's source name is a loc part)
    ("shard.mix={web: {wieght: 1}}", "shard.mix.web.wieght", "'epochs', 'min_repeat_distance', 'target_tokens', 'weight'"),
    # a list of sections
    ("decontam.eval_sets=[{name: a, paths: [x], fields: [q], id_fild: i}]", "decontam.eval_sets.0.id_fild", "'id_field'"),
    # a profile is validated as a FilterConfig of its own: keys named from filter.profiles.<name>
    ("filter.profiles={science: {gopher_quality: {min_wrods: 3}}}", "filter.profiles.science.gopher_quality.min_wrods",
     "'min_stop_words', 'min_words'"),
])
def test_unknown_key_in_nested_sections_lists_the_allowed_keys(override, key, allowed):
    # These listed "allowed keys here: []" before: the walk stopped at dict/list annotations and began at
    # WinnowConfig for errors raised by a profile's own FilterConfig.
    with pytest.raises(ConfigError) as e:
        load_config(overrides=[override])
    msg = str(e.value)
    assert f"unknown config key {key!r}; allowed keys here: [" in msg and allowed in msg, msg
    assert "allowed keys here: []" not in msg


def test_bad_literal_names_key_value_and_allowed_values():
    with pytest.raises(ConfigError) as e:
        load_config(overrides=["ingest.format=pdf"])
    msg = str(e.value)
    assert "ingest.format" in msg and "'pdf'" in msg and "'jsonl'" in msg and "'wet'" in msg


@pytest.mark.parametrize(("override", "line"), [
    # pydantic said "a valid dictionary or instance of MixSourceConfig", a class the user never wrote
    ("shard.mix={web: 0.7}", "config key 'shard.mix.web': got 0.7: should be a mapping of the keys "
                             "['epochs', 'min_repeat_distance', 'target_tokens', 'weight']"),
    ("shard.split=0.1", "config key 'shard.split': got 0.1: should be a mapping of the keys "
                        "['unit', 'validation', 'validation_shards']"),
    # "unable to interpret input" named no value that would do
    ("passages.enabled=maybe", "config key 'passages.enabled': got 'maybe': should be true or false"),
    # a filter profile's error came as "filter.profiles.web: invalid configuration:" then the error again
    ("filter.profiles.web.gopher_quality.min_words=-3",
     "config key 'filter.profiles.web.gopher_quality.min_words': got -3: allowed 0 <= value"),
    # "Input should be less than 1" named one bound of two
    ("dedup.threshold=1.5", "config key 'dedup.threshold': got 1.5: allowed 0.0 < value < 1.0"),
    ("passages.min_words=0", "config key 'passages.min_words': got 0: allowed 1 <= value <= 10000"),
])
def test_a_wrong_shape_says_what_is_allowed_in_the_users_terms(override, line):
    with pytest.raises(ConfigError) as e:
        load_config(overrides=[override])
    assert str(e.value) == f"invalid configuration:\n  {line}"


def test_a_key_of_a_mapping_with_built_in_entries_merges_over_them():
    # The mapping given replaced the built-in one: `pii.replacements.email` failed for the thirteen kinds it
    # dropped, and a language added to refs.vocab as docs/refs.md says dropped en, de, fr and es.
    from udfs.refs.vocab import DEFAULT_VOCAB

    cfg = load_config(overrides=["pii.replacements.email=<MAIL>", "refs.vocab.en.table=[tbl]",
                                 "filter.langid.aliases={fil: tl}"])
    assert (cfg.pii.replacements["email"], cfg.pii.replacements["ipv4"]) == ("<MAIL>", "<IPV4>")
    assert (cfg.refs.vocab["en"].table, cfg.refs.vocab["en"].figure) == (["tbl"], DEFAULT_VOCAB["en"]["figure"])
    assert cfg.filter.langid.aliases == {"no": "nb", "fil": "tl"}
    added = load_config(overrides=[f"refs.vocab.xx={json.dumps(DEFAULT_VOCAB['en'])}", "refs.default_language=xx"])
    assert sorted(added.refs.vocab) == ["de", "en", "es", "fr", "xx"]
    assert load_config().refs.vocab == load_config(overrides=["refs.vocab={}"]).refs.vocab
    with pytest.raises(ConfigError) as e:
        load_config(overrides=["pii.replacements.mail=<MAIL>"])
    assert "config key 'pii.replacements': unknown PII kinds ['mail']; allowed: ['email'," in str(e.value)


def test_required_keys_not_given_are_one_line_naming_them():
    # Each one was a line of its own that repeated the whole mapping given ("got {'table': ['t']}: Field required").
    with pytest.raises(ConfigError) as e:
        load_config(overrides=["refs.vocab.xx={table: [t], figure: [f]}"])
    assert str(e.value) == (
        "invalid configuration:\n  config key 'refs.vocab.xx' lacks the required keys ['equation', 'section', "
        "'appendix', 'algorithm', 'listing', 'footnote', 'numbers', 'ordinals', 'conjunctions', 'prepositions', "
        "'external', 'bibliography']")


def test_out_of_range_value():
    with pytest.raises(ConfigError, match=r"run.seed.*-1"):
        load_config(overrides=["run.seed=-1"])


@pytest.mark.parametrize("value", ["abc", "-2", " 5", "1.5", "", "2147483648"])
def test_delta_statistics_columns_in_spark_conf_must_be_an_integer_from_minus_one(value):
    # Delta would read the value only at a stage's first table write, with a Java stack trace.
    key = "spark.databricks.delta.properties.defaults.dataSkippingNumIndexedCols"
    with pytest.raises(ConfigError, match=rf"spark\.conf\.{re.escape(key)}='{re.escape(value)}': allowed: an integer >= -1"):
        load_config(overrides=[f'spark.conf={{{key}: "{value}"}}'])
    for ok in ("-1", "0", "32"):
        assert load_config(overrides=[f'spark.conf={{{key}: "{ok}"}}']).spark.conf == {key: ok}



@pytest.mark.parametrize("root", ["run.root=", "run.root='  '"])
def test_blank_root_is_refused_not_the_filesystem_root(root):
    with pytest.raises(ConfigError, match=r"run.root.*not blank"):
        load_config(overrides=[root])
    assert load_config(overrides=["run.root=x"]).table_path("documents") == "x/tables/documents"


def test_bad_stage_order():
    with pytest.raises(ConfigError, match="chain order"):
        load_config(overrides=["pipeline.stages=[dedup, ingest]"])
    with pytest.raises(ConfigError, match="unknown stage 'dedupe'"):
        load_config(overrides=["pipeline.stages=[dedupe]"])


def test_empty_stage_list_is_refused():
    with pytest.raises(ConfigError, match=r"pipeline.stages.*empty.*'ingest'"):
        load_config(overrides=["pipeline.stages=[]"])


@pytest.mark.parametrize("item", ["shard.num_shards=true", "dedup.threshold=yes", "ingest.input_partitions=off"])
def test_yes_no_is_not_a_number(item):
    # YAML reads true/yes/on as booleans; pydantic's lax mode would take them as 1 and run on.
    key = item.split("=")[0]
    with pytest.raises(ConfigError, match=rf"'{re.escape(key)}': got (True|False): .*a number, not true/false"):
        load_config(overrides=[item])
    assert load_config(overrides=["dedup.near=false", "tokenize.roundtrip_sample_fraction=1e-3"]).dedup.near is False


@pytest.mark.parametrize("bad", ["novalue", "=3", "a..b=1"])
def test_malformed_override(bad):
    with pytest.raises(ConfigError, match="KEY.PATH=VALUE"):
        parse_override(bad)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config([tmp_path / "nope.yaml"])
    p = tmp_path / "list.yaml"
    p.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config([p])


def test_fingerprints_are_stable_and_sensitive():
    a, b = load_config(), load_config()
    assert a.fingerprint() == b.fingerprint() and len(a.fingerprint()) == 64
    c = load_config(overrides=["run.seed=43"])
    assert c.fingerprint() != a.fingerprint()
    assert c.stage_fingerprint("ingest") != a.stage_fingerprint("ingest")
    d = load_config(overrides=["shard.num_shards=5"])
    assert d.stage_fingerprint("ingest") == a.stage_fingerprint("ingest")
    assert d.stage_fingerprint("shard") != a.stage_fingerprint("shard")


def test_audit_keys_join_the_tokenize_fingerprint_while_it_fills_the_audit():
    a = load_config()
    threshold = load_config(overrides=["audit.min_count=9"])
    assert threshold.stage_fingerprint("tokenize") != a.stage_fingerprint("tokenize")
    assert threshold.stage_fingerprint("shard") == a.stage_fingerprint("shard")
    off = load_config(overrides=["audit.inline=false"])
    assert off.stage_fingerprint("tokenize") != a.stage_fingerprint("tokenize")
    # without the inline audit, the other audit keys change nothing the stage writes
    off_threshold = load_config(overrides=["audit.inline=false", "audit.min_count=9"])
    assert off_threshold.stage_fingerprint("tokenize") == off.stage_fingerprint("tokenize")


def test_layout_paths_keep_uris():
    cfg = load_config(overrides=["run.root=s3://bucket/prefix/"])
    assert cfg.table_path("documents") == "s3://bucket/prefix/tables/documents"
    assert cfg.shards_path == "s3://bucket/prefix/shards"
    assert cfg.report_path == "s3://bucket/prefix/report"


def test_a_section_check_names_its_keys_without_the_whole_section():
    with pytest.raises(ConfigError) as e:
        load_config(overrides=['ingest.inputs=["a/*.jsonl"]', 'ingest.fields_by_input={"b/*.jsonl": {text: body}}'])
    line = str(e.value).splitlines()[1].strip()
    assert line.startswith("ingest.fields_by_input: 'b/*.jsonl' is not one of ingest.inputs"), line
    assert "got {" not in line


def test_langid_confident_score_is_a_probability_or_null():
    assert load_config(overrides=["filter.langid.confident_score=null"]).filter.langid.confident_score is None
    assert load_config(overrides=["filter.langid.confident_score=0.9"]).filter.langid.confident_score == 0.9
    for bad in ("1.5", "-0.1"):
        with pytest.raises(ConfigError, match=r"filter.langid.confident_score"):
            load_config(overrides=[f"filter.langid.confident_score={bad}"])
