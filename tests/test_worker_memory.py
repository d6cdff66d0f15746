"""The Python worker's memory settings: glibc keeps freed blocks, Arrow allocates with malloc, and the
filter's signals come out the same with and without them (each check in a fresh interpreter, since the
settings are process-wide)."""

import platform
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _run(code: str) -> str:
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    return res.stdout.strip()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_keep_freed_memory_applies_once_and_switches_the_arrow_pool():
    out = _run("import pyarrow as pa; from udfs.worker_memory import keep_freed_memory as k; "
               "print(k(), k(), pa.default_memory_pool().backend_name)")
    assert out == "True True system"


def test_signals_are_the_same_with_the_memory_settings():
    code = (
        "import pyarrow as pa, pyarrow.compute as pc\n"
        "from udfs.quality import quality_signals\n"
        "from udfs.quality.profile import profile_signals\n"
        "texts = pa.array(['A short page.\\n\\nIt says the same thing twice. It says the same thing twice.',"
        " '== Heading ==\\n[[Link|label]] and {{cite web|x}} text', '', None, 'x' * 5000 + ' y\\n' * 300])\n"
        "def run():\n"
        "    return pa.StructArray.from_arrays([quality_signals(texts), profile_signals(texts)], ['q', 'p'])\n"
        "before = run()\n"
        "from udfs.worker_memory import keep_freed_memory\n"
        "keep_freed_memory()\n"
        "print(before.equals(run()), run().equals(before))\n"
    )
    assert _run(code) == "True True"
