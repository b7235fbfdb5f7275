"""What `fuzzpy check --formula` costs (docs/formulas.md): for each example, one plain check, then
the derivation (re-checks, sympy), as a ratio to the plain check in the same process; and whether
a plain `fuzzpy check` process imports sympy (it must not).

    python benchmarks/formula_cost.py [examples/kmeans.fz ...]
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ["examples/kmeans.fz", "examples/histogram.fz", "examples/svt.fz", "examples/kmeans_gauss.fz"]


def main(files: list[str]) -> None:
    from fuzzpy.checking.formulas import derive
    from fuzzpy.checking.program import check_file

    for name in files:
        path = ROOT / name if not Path(name).is_absolute() else Path(name)
        t = time.perf_counter()
        report = check_file(path)
        plain = time.perf_counter() - t
        t = time.perf_counter()
        fr = derive(report, lambda p: check_file(path, p), {}, timeout=60)
        took = time.perf_counter() - t
        main_f = fr.main
        shown = main_f.text if main_f is not None and main_f.expr is not None else (main_f.reason if main_f else "-")
        print(f"{name}: plain check {plain * 1000:.0f} ms; derivation {took * 1000:.0f} ms over {fr.checks} checks "
              f"= {took / plain:.1f}x the plain check; {main_f.name if main_f else 'cost'} = {shown}")
    probe = ("import sys; from fuzzpy.interfaces.cli import run_app; run_app(['check', 'examples/quickstart.fz']); "
             "print('sympy imported:', 'sympy' in sys.modules, file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT)
    print("plain fuzzpy check:", out.stderr.strip().splitlines()[-1])


if __name__ == "__main__":
    main(sys.argv[1:] or DEFAULT)
