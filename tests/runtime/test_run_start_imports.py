"""What a whole `fuzzpy run` of a Laplace count imports: the command-line framework (typer,
click, rich, pydantic) and the accountant's arbitrary-precision and scientific libraries (mpmath,
scipy) are loaded only by what uses them.  Each is tens of milliseconds of a run's start-up,
which is most of a small run's time."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UNNEEDED = ("typer", "click", "rich", "pydantic", "mpmath", "scipy")

# The console entry, with its final os._exit replaced so that the process can be looked into.
WHOLE_RUN = textwrap.dedent('''
    import sys, runpy
    import fuzzpy.interfaces.checkcmd as entry
    entry.exit_process = sys.exit
    sys.argv = ["fuzzpy", "run", sys.argv[1], "--data", sys.argv[2], "--budget", "1", "--seed", "1",
                "--format", "json"]
    try:
        runpy.run_module("fuzzpy", run_name="__main__")
    except SystemExit as e:
        code = e.code
    print(code, "fuzzpy.runtime.interpreter" in sys.modules,
          sorted(m for m in UNNEEDED if m in sys.modules), file=sys.stderr)
''')

CERTIFIED_MARGIN = textwrap.dedent('''
    import mpmath
    from fuzzpy.accounting._num import cert_margin
    with mpmath.workdps(40):
        first = cert_margin()  # made inside a caller's higher precision
    print(first == mpmath.mpf("1e-30"), first is cert_margin())
''')


def _last_line(args: list[str], code: str, stream: str = "stdout") -> str:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    return getattr(done, stream).strip().split("\n")[-1]


def test_a_laplace_run_imports_neither_the_cli_framework_nor_the_accounting_libraries(tmp_path: Path) -> None:
    prog = tmp_path / "count.fz"
    prog.write_text("schema T { x : num[0, 10] }\n"
                    "function main (db : bag T) : fuzzy num { laplace 1.0 (count db) }\n")
    data = tmp_path / "t.csv"
    data.write_text("1\n2\n3\n")
    line = _last_line([str(prog), str(data)], f"UNNEEDED = {UNNEEDED!r}\n" + WHOLE_RUN, "stderr")
    assert line == "0 True []"  # it ran, to the end, without any of them


def test_the_certificate_margin_is_made_at_the_default_precision_whoever_asks_first() -> None:
    """mpmath is imported when a certificate first needs its margin: the margin is the one the
    module made at import before, 1e-30 at 53 bits, even when asked inside a 40-digit context."""
    assert _last_line([], CERTIFIED_MARGIN) == "True True"
