# Winnow: `make run` (the chain on sample_data/) and `make test`; each creates .venv when missing.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run
# The JVM's class archive (jobs/class_archive.py) is made once after an install.
CLASSES := $(VENV)/.classes
# The loaders of the consumers extra (torch, megatron-core, mosaicml-streaming) in their own venv, as a
# training environment, pinned in tests/consumers-lock.txt (~2.5 GB of wheels, 4.9 GB installed): it cannot
# share .venv with the dev extra (datatrove needs huggingface-hub>=1.6, streaming imports transformers<5,
# which needs huggingface-hub<1). tests/test_consumers.py runs it; with too little disk it is skipped, loudly.
CONSUMERS_VENV := .venv-consumers
CONSUMERS := $(CONSUMERS_VENV)/.installed
CONF ?= conf/local.yaml
ROOT ?= out
INPUTS ?=
# Options passed on to jobs/pipeline.py by `make run`, e.g. ARGS=--replace or ARGS='--from filter'.
ARGS ?=
PYTEST_ARGS ?=
export SPARK_LOCAL_IP ?= 127.0.0.1

.PHONY: run test lint dist jars bench clean java-check help

help:
	@echo "make run      run jobs/pipeline.py on sample_data/ (INPUTS='[glob, ...]' ROOT=dir to change; ARGS=--replace etc.)"
	@echo "make test     run the test suite"
	@echo "make lint     ruff"
	@echo "make dist     build dist/winnow-*.whl and dist/winnow.zip for spark-submit --py-files"
	@echo "make jars     resolve the Delta jars with Maven into .cache/jars (offline / proxied machines)"
	@echo "make bench    run the benchmarks (not part of make test)"

java-check:
	@v=$$(java -version 2>&1 | awk -F'"' '/version/ {print $$2; exit}'); \
	major=$${v%%.*}; [ "$$major" = "1" ] && major=$$(echo $$v | cut -d. -f2); \
	if [ -z "$$v" ] || [ "$$major" -lt 17 ] 2>/dev/null; then \
	  echo "Winnow needs Java 17 or newer on PATH (found: '$${v:-none}'). Install a JDK 17+ and retry." >&2; exit 1; \
	fi

# Two install levels: `make run` needs only the chain (`.[spark]`); `make test` adds the test, peer and
# gate extras. pip's output goes to $(VENV)/install.log; each step says what it does.
$(RUN_STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "Winnow needs $(PYTHON) (Python 3.11) on PATH" >&2; exit 1; }
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	@echo "winnow: installing Winnow and Spark into $(VENV) (pip; a few minutes the first time; log: $(VENV)/install.log)"
	@start=$$(date +%s); { $(PY) -m pip install -q --upgrade pip && $(PY) -m pip install -q -e ".[spark]"; } >>$(VENV)/install.log 2>&1 \
	  || { echo "winnow: pip failed; the last lines of $(VENV)/install.log:" >&2; tail -20 $(VENV)/install.log >&2; exit 1; }; \
	  echo "winnow: installed in $$(( $$(date +%s) - start )) s"
	@echo "winnow: resolving the Delta jars (Spark's Ivy, once)"
	@$(PY) -c "from pipelines.core.session import cached_delta_jars, resolve_delta_jars; cached_delta_jars() or resolve_delta_jars()" || true
	@echo "winnow: compiling the numba kernels (MinHash, paragraphs, language ID; once, about 15 s)"
	@$(PY) -m udfs.compiled || true
	@touch $(RUN_STAMP)

$(STAMP): $(RUN_STAMP)
	@echo "winnow: installing the test extras (pytest, moto, peers, JAX for the gate; log: $(VENV)/install.log)"
	@$(PY) -m pip install -q -e ".[spark,dev,gate]" >>$(VENV)/install.log 2>&1 \
	  || { echo "winnow: pip failed; the last lines of $(VENV)/install.log:" >&2; tail -20 $(VENV)/install.log >&2; exit 1; }
	@touch $(STAMP)

# Once per install (a minute or more): the class archive local sessions start from. `make test` and
# `make bench` make it; `make run` does not wait for it (a session without it starts a few seconds slower).
$(CLASSES): $(RUN_STAMP)
	@echo "winnow: writing the JVM class archive local Spark sessions start from (once; about a minute)"
	@$(PY) -c "from jobs.class_archive import make_class_archive; from pipelines.core.session import cached_delta_jars, class_archive; class_archive(cached_delta_jars() or []).is_file() or make_class_archive()" || true
	@touch $(CLASSES)

run: java-check $(RUN_STAMP)
	$(PY) jobs/pipeline.py --conf $(CONF) --set run.root=$(ROOT) $(if $(INPUTS),--set "ingest.inputs=$(INPUTS)") $(ARGS)
	@if [ -f $(ROOT)/shards/manifest.json ]; then $(PY) jobs/verify.py --conf $(CONF) --set run.root=$(ROOT); fi
	@echo "Outputs: $(ROOT)/tables/ (Delta), $(ROOT)/shards/, $(ROOT)/report/report.html, $(ROOT)/audit/, $(ROOT)/config/"

$(CONSUMERS): tests/consumers-lock.txt tests/install_consumers.sh
	tests/install_consumers.sh $(PYTHON) $(CONSUMERS_VENV)

# Doctests of udfs/ and pipelines/ run with the tests (examples in docstrings are checked, not decoration).
test: java-check $(STAMP) $(CLASSES) $(CONSUMERS)
	$(PY) -m pytest --doctest-modules udfs pipelines tests $(PYTEST_ARGS)

lint: $(STAMP)
	$(PY) -m ruff check pipelines udfs jobs tests bench

dist: $(STAMP)
	rm -rf dist build && mkdir -p dist
	$(PY) -m pip wheel -q --no-deps -w dist .
	$(PY) -c "import zipfile,pathlib; z=zipfile.ZipFile('dist/winnow.zip','w',zipfile.ZIP_DEFLATED); [z.write(p) for d in ('pipelines','udfs','jobs') for p in sorted(pathlib.Path(d).rglob('*')) if p.is_file() and '__pycache__' not in p.parts]"
	@ls -l dist

jars: $(STAMP)
	@coords=$$($(PY) -m pipelines.core.session); mkdir -p .cache/jars; \
	for c in $$coords io.delta:delta-storage:$${coords##*:}; do \
	  mvn -q dependency:copy -Dartifact=$$c -DoutputDirectory=.cache/jars || exit 1; done; \
	echo "Delta jars in .cache/jars; use them with --set 'spark.jars=[$$(ls .cache/jars/*.jar | paste -sd, -)]'"

bench: java-check $(STAMP) $(CLASSES)
	$(PY) -m bench.run

clean:
	rm -rf $(ROOT) dist build spark-warehouse metastore_db derby.log .pytest_cache
