"""Resource limits shared by the checker and the runtime.

The checker only accepts a program whose unrolled recursion fits these limits, and the runtime
enforces the same numbers, so a checked program never meets a limit the checker did not account
for (docs/soundness.md, "Failure").  They are read at use time (`limits.CALL_DEPTH`), so a test
harness can lower them for both sides at once.
"""

from __future__ import annotations

import threading
from typing import Callable

# Function calls nested inside one another at run time: the interpreter refuses to nest deeper
# (E0604), and the checker refuses a program whose unrolled calls could nest deeper (E0306), so
# only a recursion the checker could not unroll can meet this limit (and that is a failure
# effect, docs/soundness.md).  Calls under `sample` run when the distribution is drawn, at depth
# 0, so a loop of releases does not nest.  The interpreter's thread has the stack and recursion
# limit for this depth on every supported Python.
CALL_DEPTH = 20_000

# Function instances the checker checks one inside the other (unrolling a recursion over public
# constants checks one level per call): deeper is refused (E0306).
UNROLL_DEPTH = 20_000

# Python frames and stack for the checker's and the interpreter's threads.
STACK_BYTES = 1024 * 1024 * 1024
RECURSION_LIMIT = 1_000_000


def in_large_stack_thread(work: Callable[[], None], name: str) -> None:
    """Run `work()` to its end in a new thread with a stack of STACK_BYTES (deep programs and
    types must not crash the process); `work` raises its own recursion limit inside."""
    old = threading.stack_size()
    threading.stack_size(STACK_BYTES)
    try:
        thread = threading.Thread(target=work, name=name)
        thread.start()
        thread.join()
    finally:
        threading.stack_size(old)

# A checked program builds no table with more than this many times the rows of its inputs
# (E0311): `union` and the joins are the primitives that add rows, and the checker bounds every table by
# its distance coefficients (docs/soundness.md, "Growth").  The runtime needs memory for that
# multiple of the loaded tables.
MAX_GROWTH = 64

# Calls one function instance makes in all, its callees' included: past this a run may take so
# long that it does not finish in practice (`fib 60` makes 10^12), which the checker treats as a
# possible failure (FAIL, docs/soundness.md rule Unroll).
MAX_CALLS = 10_000_000

# Calls one row of a row function may make (row by row, the runtime's fallback): past this the row
# gets a missing value, like any row whose evaluation fails (docs/runtime.md).
ROW_CALLS = 1_000_000

# Elements of a list computed at run time or at check time by `range` (primitives/lists.py): a
# longer one is refused (E1502) when its arguments are constants, and fails the run (E0604) when
# they are released values.
MAX_LIST = 100_000

# Rows per value of a key: the most a public schema may declare (`at most N per value`) and the
# largest k of `truncate` (primitives/joins.py).  A join's result has at most that many times the
# rows of its private side, within MAX_GROWTH.
MAX_PER_KEY = 10_000
