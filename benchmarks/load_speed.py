"""Whole-process `fuzzpy run` against a hand-written pandas + numpy script, CSV and Parquet.

    python benchmarks/load_speed.py [--rows 1000000] [--repeat 3] [--dir /tmp/fuzzpy-load]
                                    [--queries count,sum,...] [--formats csv,parquet]
                                    [--code DIR] [--minimal]

UCI Adult is replicated to `--rows` rows (written once into `--dir`, as CSV with a header and as
Parquet).  For each of six queries, two commands run as separate processes, interleaved:
`python -m fuzzpy run PROG --data FILE --seed 1 --format json` (start-up, checking, reading the
file, conforming it to the schema, hashing it, running, releasing) and a script that reads the
same file with pandas and releases the same statistic with numpy's Laplace noise.  Printed per
query and format: the best wall time of each, and the ratio fuzzpy / pandas (goal: at most
1.5), and the same for CPU time (user + system of the child), which is the fairer figure on a
busy machine, and the one-minute load average after the runs.  `--code DIR` adds a third
command, interleaved with the other two: the same `fuzzpy run` importing fuzzpy from DIR (another
checkout, say `git worktree add DIR HEAD~1`), to compare two versions in one session; its time and
its ratio to pandas are printed as well.  `--minimal` declares only the columns each query
reads (the program's schema, and the pandas script's `columns=`/`usecols=`), so both sides may
skip the rest of the file; the peak memory (maximum resident set) of each process is printed too.
A run hashes a Parquet file the user alone can write only once per state of the file (docs/data.md,
"Known digests"), so the best of R is a run whose identity was known; with FUZZPY_NO_CACHE=1 in
the environment every run hashes the file.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_speed import ADULT, SCHEMA  # noqa: E402  (the Adult schema and data, shared)

COLUMNS = ("age workclass fnlwgt education education_num marital_status occupation relationship race sex "
           "capital_gain capital_loss hours_per_week native_country income").split()
AGES = list(range(17, 91))

# Each declared column's type in the Adult schema, and the columns each query reads (--minimal).
COLUMN_TYPES = dict(re.findall(r"(\w+) : (cat\{[^}]*\}|\w+\[[^\]]*\]|string)", SCHEMA))
READS = {"count": ["age"], "sum": ["capital_gain"], "mean": ["age"], "histogram": ["race"],
         "crosstab": ["sex", "income"], "median": ["age"]}

# name -> (fuzzpy main's result type and body, the pandas statement computing `value`)
QUERIES = {
    "count": ("fuzzy num", "laplace eps (count (filter (fun r -> r.age >= 40) db))",
              "value = float((df.age >= 40).sum()) + rng.laplace(0, 1 / eps)"),
    "sum": ("fuzzy num", "laplace eps (sum (map (fun r -> clip 0 5000 r.capital_gain) db))",
            "value = float(df.capital_gain.clip(0, 5000).sum()) + rng.laplace(0, 5000 / eps)"),
    "mean": ("fuzzy num", "noisy_mean eps 17 90 (map (fun r -> r.age) db)",
             "value = (float(df.age.clip(17, 90).sum()) + rng.laplace(0, 90 / (eps / 2))) / "
             "(len(df) + rng.laplace(0, 1 / (eps / 2)))"),
    "histogram": (None, "histogram eps (fun r -> r.race) db",
                  "value = (df.race.value_counts() + rng.laplace(0, 1 / eps, df.race.nunique())).to_dict()"),
    "crosstab": (None, "histogram eps (fun r -> (r.sex, r.income)) db",
                 "value = (df.groupby(['sex', 'income']).size() + rng.laplace(0, 1 / eps, 4)).to_dict()"),
    "median": ("fuzzy num", f"exponential eps {AGES} (fun c -> imbalance db c)",
               "import numpy as np\n"
               f"cands = np.array({AGES})\n"
               "scores = np.array([-abs(int((df.age < c).sum()) - int((df.age >= c).sum())) for c in cands])\n"
               "w = np.exp(eps * (scores - scores.max()) / 2)\n"
               "value = float(rng.choice(cands, p=w / w.sum()))"),
}
IMBALANCE = """
function imbalance (db : bag Adult) (c : num) : num {
  let (below, rest) = split (fun r -> r.age < c) db;
  0 - abs (count below - count rest)
}
"""


def program(name: str, minimal: bool = False) -> str:
    result, body, _ = QUERIES[name]
    header = 'import "stdlib/stats.fz";\n' if name in ("mean", "histogram", "crosstab") else ""
    extra = IMBALANCE if name == "median" else ""
    typed = f" : {result}" if result else ""
    return f"{header}{schema(name) if minimal else SCHEMA}{extra}\nfunction main (db : bag Adult){typed} {{ {body} }}\n"


def schema(name: str) -> str:
    """The Adult schema with only the columns query `name` reads."""
    columns = ", ".join(f"{c} : {COLUMN_TYPES[c]}" for c in READS[name])
    return f"schema Adult {{ {columns} }}\nparam eps : num = 0.1;\n"


def script(name: str, path: Path, minimal: bool = False) -> str:
    cols = READS[name] if minimal else None
    read = (f"pd.read_parquet({str(path)!r}, columns={cols!r})" if path.suffix == ".parquet"
            else f"pd.read_csv({str(path)!r}, skipinitialspace=True, usecols={cols!r})")
    return ("import numpy as np, pandas as pd\n"
            f"df = {read}\nrng = np.random.default_rng(1)\neps = 0.1\n"
            f"{QUERIES[name][2]}\nprint(value)\n")


def make_data(folder: Path, rows: int) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    csv, parquet = folder / f"adult_{rows}.csv", folder / f"adult_{rows}.parquet"
    if not csv.exists() or not parquet.exists():
        base = pd.read_csv(ADULT, header=None, names=COLUMNS, skipinitialspace=True)
        big = pd.concat([base] * (rows // len(base) + 1), ignore_index=True).iloc[:rows]
        big.to_csv(csv, index=False)
        big.to_parquet(parquet, index=False)
    return {"csv": csv, "parquet": parquet}


def timed(cmd: list[str], where: Path, code: Path | None = None) -> tuple[float, float, float]:
    """Wall and CPU seconds (user + system) and peak memory (MB) of one child process (importing
    fuzzpy from `code`).  It runs in `where` (the data folder): `python -m` puts its working
    folder first on the path, so a checkout as working folder would shadow `code`."""
    env = None if code is None else {**os.environ, "PYTHONPATH": str(code)}
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=where)
        _, status, usage = os.wait4(child.pid, 0)  # this child's own usage, its peak memory too
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(cmd)} failed:\n{err.read().decode(errors='replace')}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def compile_sources(code: Path | None = None) -> None:
    """Byte-compile fuzzpy (this checkout's, or `code`'s) once before timing: with
    PYTHONDONTWRITEBYTECODE set, or after an edit, every child would otherwise compile the stale
    modules from source again, which a user's installed package never does (pandas' and
    numpy's are compiled at install)."""
    import fuzzpy

    package = Path(fuzzpy.__file__).parent if code is None else code / "fuzzpy"
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/fuzzpy-load"))
    ap.add_argument("--queries", default=",".join(QUERIES))
    ap.add_argument("--formats", default="csv,parquet")
    ap.add_argument("--code", type=Path, default=None, help="another fuzzpy checkout, timed too")
    ap.add_argument("--minimal", action="store_true", help="declare and read only the columns each query reads")
    ap.add_argument("--make-data-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.make_data_only:
        make_data(args.dir, args.rows)
        return
    code = None if args.code is None else args.code.resolve()
    compile_sources()
    if code is not None:
        compile_sources(code)
    # The data is made in a child: a child forked from a process holding the replicated table
    # would count that table in its own peak memory.
    subprocess.run([sys.executable, __file__, "--make-data-only", "--rows", str(args.rows), "--dir", str(args.dir)],
                   check=True)
    files = {"csv": args.dir / f"adult_{args.rows}.csv", "parquet": args.dir / f"adult_{args.rows}.parquet"}
    print(f"{args.rows:,} rows; best of {args.repeat} interleaved runs; whole processes")
    other = "" if code is None else f" {'--code s':>9} {'ratio':>6} {'cpu ratio':>10}"
    print(f"{'query':<10} {'file':<8} {'fuzzpy s':>9} {'pandas s':>9} {'ratio':>6} {'cpu ratio':>10}{other} "
          f"{'fuzzpy MB':>10} {'pandas MB':>10} {'mem ratio':>10} {'load':>5}")
    for name in args.queries.split(","):
        prog = args.dir / f"{name}.fz"
        prog.write_text(program(name, args.minimal))
        for fmt in args.formats.split(","):
            data = files[fmt]
            ours = [sys.executable, "-m", "fuzzpy", "run", str(prog), "--data", str(data), "--seed", "1",
                    "--param", "eps=0.1", "--budget", "1", "--format", "json"]
            theirs = [sys.executable, "-c", script(name, data, args.minimal)]
            runs = [(timed(ours, args.dir), timed(theirs, args.dir),
                     timed(ours, args.dir, code) if code else (0.0, 0.0, 0.0))
                    for _ in range(args.repeat)]
            fw, fc = min(r[0][0] for r in runs), min(r[0][1] for r in runs)
            pw, pc = min(r[1][0] for r in runs), min(r[1][1] for r in runs)
            ow, oc = min(r[2][0] for r in runs), min(r[2][1] for r in runs)
            fm, pm = min(r[0][2] for r in runs), min(r[1][2] for r in runs)
            load = os.getloadavg()[0]  # the machine may be shared: read the ratios
            other = "" if code is None else f" {ow:9.2f} {ow / pw:6.2f} {oc / pc:10.2f}"
            print(f"{name:<10} {fmt:<8} {fw:9.2f} {pw:9.2f} {fw / pw:6.2f} {fc / pc:10.2f}{other} "
                  f"{fm:10.0f} {pm:10.0f} {fm / pm:10.2f} {load:5.1f}", flush=True)


if __name__ == "__main__":
    main()
