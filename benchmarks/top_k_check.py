"""Checking top_k over the Adult sample's 15 occupations: check time and instances for k = 2..5.

    python benchmarks/top_k_check.py

Each line prints the check time, the function instances the checker checked and the time as a
ratio of k = 2's, measured in this process.  Before rule Widen (breadth) (docs/soundness.md) the
instances grew exponentially with k (8,000 for k = 3; 70 s for k = 5); now they stay near 100.
"""

from __future__ import annotations

import time
from pathlib import Path

from fuzzpy.checking.program import check_source

ROOT = Path(__file__).resolve().parent.parent
OCCUPATIONS = ["Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial", "Prof-specialty",
               "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical", "Farming-fishing", "Transport-moving",
               "Priv-house-serv", "Protective-serv", "Armed-Forces", "?"]


def program(k: int) -> str:
    """top_k over the 15 occupations of the Adult schema."""
    quoted = ", ".join(f'"{o}"' for o in OCCUPATIONS)
    return (f'import "stdlib/select.fz"\n'
            f'schema Adult {{ occupation : cat{{{quoted}}} }}\n'
            f'param occupations : list string = [{quoted}];\n'
            f'function main (db : bag Adult) : fuzzy (list string) {{\n'
            f'  top_k 0.1 {k} occupations (fun r -> r.occupation) db\n}}\n')


def main() -> None:
    base = None
    for k in range(2, 6):
        t0 = time.perf_counter()
        report = check_source(program(k), str(ROOT / "benchmarks" / f"top_{k}.fz"))
        dt = time.perf_counter() - t0
        assert report.ok, [d.message for d in report.diagnostics]
        base = base or dt
        print(f"k={k}: check {dt:.3f} s, {report.instances} instances, epsilon {report.epsilon}, "
              f"x{dt / base:.2f} of k=2")


if __name__ == "__main__":
    main()
