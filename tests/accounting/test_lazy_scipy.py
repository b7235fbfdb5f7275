"""scipy is imported only by the accounting that uses it (Gaussian and subsampled conversions,
the RDP minimisation): its import costs about 0.3 s, a third of a whole `fuzzpy run` of a
Laplace count on a one-column Parquet file."""

from __future__ import annotations

import subprocess
import sys
import textwrap

LAPLACE_RUN = textwrap.dedent('''
    import sys
    import pandas as pd
    import fuzzpy
    prog = ("""
    schema T { x : num[0, 10] }
    function main (db : bag T) : fuzzy num { laplace 1.0 (count db) }
    """)
    fuzzpy.run(prog, pd.DataFrame({"x": [1.0, 2.0, 3.0]}), budget=1, seed=1)
    print("fuzzpy.runtime.interpreter" in sys.modules, "scipy" in sys.modules)
''')

GAUSSIAN_CONVERSION = textwrap.dedent('''
    import sys
    from fractions import Fraction
    from fuzzpy.accounting import gdp_delta_float, zcdp_epsilon
    print("scipy" in sys.modules, gdp_delta_float(1.0, 1.0) > 0, zcdp_epsilon(Fraction(1, 2), Fraction(1, 10**6)) > 0,
          "scipy" in sys.modules)
''')


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\n")[-2]


def test_a_laplace_run_never_imports_scipy() -> None:
    assert _python(LAPLACE_RUN) == "True False"  # the runtime ran, without scipy


def test_gaussian_accounting_imports_scipy_when_it_needs_it() -> None:
    assert _python(GAUSSIAN_CONVERSION) == "False True True True"
