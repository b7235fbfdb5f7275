"""The commands' processes end through `exit_process`: the Python exit work runs (atexit
handlers, buffered output flushed) and the C-level teardown, where Arrow's thread pools can abort
a finished run with exit -6, is skipped."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import atexit, sys
from fuzzpy.interfaces.checkcmd import exit_process
atexit.register(lambda: print("atexit ran", end=""))
sys.stdout.write("buffered, ")
sys.stderr.write("to stderr")
exit_process(4)
"""


def test_exit_process_keeps_the_code_runs_atexit_and_flushes_both_streams():
    res = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert res.returncode == 4
    assert res.stdout == "buffered, atexit ran"
    assert res.stderr == "to stderr"

