#!/usr/bin/env bash
# Builds the consumers venv of tests/test_consumers.py from tests/consumers-lock.txt (called by `make test`).
#   usage: tests/install_consumers.sh PYTHON VENV
# The CUDA wheels torch pulls from PyPI make this venv ~5 GB installed. To keep the peak disk use near that:
# no pip cache (it would keep a second copy of ~2.5 GB of wheels), and torch and each nvidia-* wheel in a pip
# call of its own, so at most one large downloaded wheel sits beside what is already installed. With less
# free space than NEED_GB, it builds nothing and writes VENV.skipped (the test module skips, quoting it),
# unless WINNOW_REQUIRE_CONSUMERS is set to anything but 0, which makes that an error.
set -euo pipefail
PYTHON=$1 VENV=$2
LOCK=$(cd "$(dirname "$0")" && pwd)/consumers-lock.txt
NEED_GB=${WINNOW_CONSUMERS_NEED_GB:-6}
REQUIRE=${WINNOW_REQUIRE_CONSUMERS:-0}
rm -f "$VENV.skipped"
mkdir -p "$(dirname "$VENV")"
VENV=$(cd "$(dirname "$VENV")" && pwd)/$(basename "$VENV")   # absolute: TMPDIR below is built from it
if [ ! -x "$VENV/bin/python" ]; then
  where=$(dirname "$VENV")   # the disk the venv goes on
  free_gb=$(df -Pk "$where" | awk 'NR == 2 {print int($4 / 1048576)}')
  if [ "$free_gb" -lt "$NEED_GB" ]; then
    msg="the consumers venv needs ${NEED_GB} GB free on $where and ${free_gb} GB are: not built"
    if [ "$REQUIRE" != 0 ]; then echo "make test: $msg (WINNOW_REQUIRE_CONSUMERS=$REQUIRE)" >&2; exit 1; fi
    echo "make test: $msg; tests/test_consumers.py will skip (WINNOW_REQUIRE_CONSUMERS=1 makes this an error)" >&2
    echo "$msg" > "$VENV.skipped"
    exit 0
  fi
  "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip install -q --no-cache-dir --no-deps)
mkdir -p "$VENV/tmp"
export TMPDIR=$VENV/tmp   # pip's downloads on the disk checked above, removed with each call
reqs=$(grep -Ev '^\s*(#|$)' "$LOCK")
for big in $(grep -E '^(torch|nvidia-)' <<<"$reqs"); do "${PIP[@]}" "$big"; done
"${PIP[@]}" $(grep -Ev '^(torch|nvidia-)' <<<"$reqs")
rmdir "$VENV/tmp" 2>/dev/null || true
if ! err=$("$VENV/bin/python" -W ignore -c "import torch, megatron.core.datasets.gpt_dataset, streaming" 2>&1); then
  echo "make test: $VENV was installed from $LOCK but cannot import the loaders:" >&2
  tail -5 <<<"$err" >&2; exit 1
fi
touch "$VENV/.installed"
