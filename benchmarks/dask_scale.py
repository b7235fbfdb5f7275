"""`fuzzpy run --engine dask` against hand-written Dask doing the same query, on generated Parquet.

    python benchmarks/dask_scale.py --rows 20_000_000 --repeat 2
    python benchmarks/dask_scale.py --rows 100_000_000 --schema wide --rows-per-file 2_000_000 --repeat 1 \
        --sides "hand-written Dask,fuzzpy --persist,fuzzpy"
    git archive OLD fuzzpy | tar -x -C /tmp/old && python benchmarks/dask_scale.py --rows 20_000_000 \
        --sides "baseline,fuzzpy,hand-written Dask" --baseline-src /tmp/old
    python benchmarks/dask_scale.py --rows 10_000_000 --scheduler tcp://host:8786 --data /shared/adult-pq
    python benchmarks/dask_scale.py --schema flights --rows 1_000_000 --rows-per-file 250_000 --row-group 250_000 \
        --memory-limit 3GiB --repeat 1 --sides "fuzzpy,hand-written Dask"               # about a minute
    python benchmarks/dask_scale.py --schema flights --rows 50_000_000 --rows-per-file 1_000_000 \
        --row-group 1_000_000 --memory-limit 3GiB --repeat 1 --sides "fuzzpy,hand-written Dask"

Generates (once, one file at a time, never the whole table in memory) a Parquet directory of
synthetic Adult-like rows: `--schema narrow` (six columns, one free text) or `wide` (Adult's
fifteen columns and two free-text columns, about 175 bytes a row conformed), files of
`--rows-per-file` rows, row groups of `--row-group` rows.  `--schema flights` generates flights
instead (a plane, a destination, a carrier, a delay; about 250 flights a plane, the plane the
privacy unit) and a Parquet file of the planes beside them (public for `join_public`, private for
the truncated `join_private`), and its queries are the units and join programs of FLIGHT_QUERIES,
against the same work written by hand in Dask (one shuffle on the plane shared by what needs it).
Then, on one cluster (a fresh local one
per measured run, with `--workers` processes, started in its own process; or `--scheduler`), it
runs each query with `fuzzpy run --engine dask --scheduler ADDR` (a subprocess: the whole
pipeline, with a ledger, real noise, hashing and the checking pass), the same with `--persist`,
the same from another fuzzpy source tree (`--baseline-src`: its cluster runs that code too), and
the same query written by hand in Dask (a subprocess too: read_parquet, filter, count / clipped
sum / value_counts, numpy Laplace noise), interleaved, `--repeat` times each (`--sides` picks
them).  Each worker's peak resident memory (ru_maxrss, read on the worker after the run) belongs
to that run alone; the client's peak is the subprocess's own (wait4).  Printed: every run with
the load average, then the median wall time of each side and its ratio to hand-written Dask (and
to the baseline), the largest worker peak of each side and their ratio, and the size the
conformed table would have in one pandas process (summed over partitions by the workers).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import numpy as np

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

EDUCATION = ["Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm", "Assoc-voc", "9th",
             "7th-8th", "12th", "Masters", "1st-4th", "10th", "Doctorate", "5th-6th", "Preschool"]
WORKCLASS = ["Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov"]
MARITAL = ["Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed", "Married-spouse-absent",
           "Married-AF-spouse"]
OCCUPATION = ["Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial", "Prof-specialty",
              "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical", "Farming-fishing", "Transport-moving",
              "Priv-house-serv", "Protective-serv", "Armed-Forces"]
RELATIONSHIP = ["Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried"]
RACE = ["White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"]
COUNTRY = ["United-States", "Mexico", "Philippines", "Germany", "Canada", "India", "England", "Cuba", "Jamaica",
           "South", "China", "Italy", "Dominican-Republic", "Vietnam", "Guatemala", "Japan", "Poland", "Columbia"]


def _cat(values: list[str]) -> str:
    return "cat{" + ", ".join(f'"{v}"' for v in values) + "}"


# narrow: six columns, one of them free text (the size of the first measurements in docs/scale.md).
# wide: Adult's fifteen columns (workclass, occupation and native_country as free text) and two more
# free-text columns, an employer name and a note of a few words: about 3.7 times narrow's conformed size.
SCHEMAS = {
    "narrow": """schema Adult {
  age : num[17, 90],
  workclass : string,
  education : %s,
  sex : cat{"Male", "Female"},
  hours_per_week : num[1, 99],
  income : cat{"<=50K", ">50K"}
}
""" % _cat(EDUCATION),
    "wide": """schema Adult {
  age : num[17, 90],
  workclass : string,
  fnlwgt : num[10000, 1500000],
  education : %s,
  education_num : int[1, 16],
  marital_status : %s,
  occupation : string,
  relationship : %s,
  race : %s,
  sex : cat{"Male", "Female"},
  capital_gain : num[0, 99999],
  capital_loss : num[0, 4356],
  hours_per_week : num[1, 99],
  native_country : string,
  income : cat{"<=50K", ">50K"},
  employer : string,
  notes : string
}
""" % (_cat(EDUCATION), _cat(MARITAL), _cat(RELATIONSHIP), _cat(RACE)),
}
BODIES = {
    # count and clipped sum of a filtered table (examples/quickstart.fz)
    "count_sum": """function main (db : bag Adult) : fuzzy (num, num) {
  let adults = filter (fun r -> r.age >= 18) db;
  sample n = laplace 0.1 (count adults);
  sample total = laplace 0.1 (sum (map (fun r -> r.age) adults));
  return (n, total / n)
}""",
    # a histogram over 16 education levels (examples/histogram.fz)
    "histogram": """function main (db : bag Adult) {
  each (fun g -> sample n = laplace 0.5 (count g); return n) (groupby (fun r -> r.education) db)
}""",
}


# The flights-like table (`--schema flights`): one row a flight, the plane (tailnum) as the privacy
# unit, many flights per plane; a public table of planes (one row per plane) to join, and the same
# planes as a private table for the truncated private-private join.  Each query declares only the
# columns it reads (a declared column is read and checked).
MANUFACTURERS = ["BOEING", "AIRBUS", "AIRBUS INDUSTRIE", "BOMBARDIER INC", "EMBRAER", "MCDONNELL DOUGLAS",
                 "MCDONNELL DOUGLAS AIRCRAFT CO", "OTHER"]
ROWS_PER_PLANE = 250  # on average
DESTINATIONS = 105
BOUND_K, TRUNCATE_K = 4, 40
PLANE_COLUMNS = f"tailnum : string, manufacturer : {_cat(MANUFACTURERS)}, seats : int[2, 450]"
FLIGHT_QUERIES = {
    # the flights_delay shape: destinations discovered privately, flights bounded per plane, a
    # histogram over the released destinations
    "units": f"""schema Flight unit tailnum {{ tailnum : string, dest : string }}
function main (flights : bag Flight) {{
  sample dests = select_keys 0.9 0.0000001 1 (fun r -> r.dest) flights;
  each (fun g -> laplace 0.1 (count g)) (groupby_in dests (fun r -> r.dest) (bound_rows {BOUND_K} flights))
}}""",
    # seats flown per manufacturer: the flights joined with the public planes, a sum per group
    "join_public": f"""schema Flight {{ tailnum : string }}
public schema Plane {{ {PLANE_COLUMNS.replace("tailnum : string", "tailnum : string unique")} }}
function main (flights : bag Flight) (planes : bag Plane) {{
  each (fun g -> laplace 1 (sum (map (fun r -> clip 0 450 r.seats) g)))
       (groupby (fun r -> r.manufacturer) (join_public "tailnum" "tailnum" flights planes))
}}""",
    # the same with the planes private: both sides truncated per tail number, then joined
    "join_private": f"""schema Flight {{ tailnum : string }}
schema PrivatePlane {{ {PLANE_COLUMNS} }}
function main (flights : bag Flight) (planes : bag PrivatePlane) {{
  let flown = join_private "tailnum" "tailnum" (truncate {TRUNCATE_K} "tailnum" flights) (truncate 1 "tailnum" planes);
  each (fun g -> laplace 0.0125 (sum (map (fun r -> clip 0 450 r.seats) g))) (groupby (fun r -> r.manufacturer) flown)
}}""",
}


def program(query: str, schema: str) -> str:
    if schema == "flights":
        return FLIGHT_QUERIES[query]
    return SCHEMAS[schema] + BODIES[query]


# ---- data -------------------------------------------------------------------------------------------

def _pick(rng: np.random.Generator, values: list[str], n: int, p: Optional[np.ndarray] = None) -> "pa.Array":
    import pyarrow as pa

    codes = rng.choice(len(values), n, p=p).astype(np.int32) if p is not None else \
        rng.integers(0, len(values), n).astype(np.int32)
    return pa.DictionaryArray.from_arrays(codes, values)


def _words(rng: np.random.Generator, vocabulary: "pa.Array", n: int, k: int) -> "pa.Array":
    """n cells of k words each, drawn from the vocabulary: free text that does not repeat."""
    import pyarrow.compute as pc

    parts = [vocabulary.take(rng.integers(0, len(vocabulary), n)) for _ in range(k)]
    return pc.binary_join_element_wise(*parts, " ")


def _vocabulary(rng: np.random.Generator, size: int = 4096) -> "pa.Array":
    import pyarrow as pa

    syllables = np.array(["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ber", "dan", "gor", "hel", "mar", "pin",
                          "ton", "wex"])
    picks = syllables[rng.integers(0, len(syllables), (size, 3))]
    return pa.array(["".join(w) for w in picks])


def _chunk(rng: np.random.Generator, n: int, schema: str, vocabulary: "pa.Array") -> "pa.Table":
    import pyarrow as pa

    cols = {
        "age": rng.integers(17, 91, n),
        "workclass": _pick(rng, WORKCLASS, n).cast(pa.string()),
        "education": _pick(rng, EDUCATION, n),
        "sex": _pick(rng, ["Male", "Female"], n),
        "hours_per_week": rng.integers(1, 100, n),
        "income": pa.DictionaryArray.from_arrays((rng.random(n) < 0.24).astype(np.int32), ["<=50K", ">50K"]),
    }
    if schema == "wide":
        cols.update({
            "fnlwgt": rng.integers(10_000, 1_500_001, n),
            "education_num": rng.integers(1, 17, n),
            "marital_status": _pick(rng, MARITAL, n),
            "occupation": _pick(rng, OCCUPATION, n).cast(pa.string()),
            "relationship": _pick(rng, RELATIONSHIP, n),
            "race": _pick(rng, RACE, n),
            "capital_gain": np.where(rng.random(n) < 0.08, rng.integers(1, 100_000, n), 0),
            "capital_loss": np.where(rng.random(n) < 0.05, rng.integers(1, 4357, n), 0),
            "native_country": _pick(rng, COUNTRY, n).cast(pa.string()),
            "employer": _words(rng, vocabulary, n, 2),
            "notes": _words(rng, vocabulary, n, 4),
        })
    return pa.table(cols)


def _planes(rows: int) -> int:
    return max(100, rows // ROWS_PER_PLANE)


def _tailnums(n: int) -> "pa.Array":
    import pyarrow as pa

    return pa.array([f"N{i:06d}" for i in range(n)])


def _flights_chunk(rng: np.random.Generator, n: int, tailnums: "pa.Array", dest_p: np.ndarray) -> "pa.Table":
    """n flights: a uniformly random plane each (about ROWS_PER_PLANE flights a plane), a skewed
    destination, a carrier, an arrival delay."""
    import pyarrow as pa

    dests = [f"D{i:03d}" for i in range(DESTINATIONS)]
    return pa.table({
        "tailnum": tailnums.take(rng.integers(0, len(tailnums), n)),
        "dest": _pick(rng, dests, n, dest_p).cast(pa.string()),
        "carrier": _pick(rng, [f"C{i:02d}" for i in range(16)], n).cast(pa.string()),
        "arr_delay": np.clip(rng.normal(5, 40, n), -60, 240).round(),
    })


def write_planes(path: Path, rows: int, seed: int = 1) -> None:
    """The planes of a flights table of `rows` rows: one row per tail number."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    n = _planes(rows)
    pq.write_table(pa.table({"tailnum": _tailnums(n), "manufacturer": _pick(rng, MANUFACTURERS, n).cast(pa.string()),
                             "seats": rng.integers(2, 451, n)}), path)


def generate(out: Path, rows: int, per_file: int, row_group: int, schema: str, seed: int = 0) -> None:
    """Files of `per_file` rows written one at a time, each built in row-group chunks: the whole
    table is never in memory."""
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    vocabulary = _vocabulary(rng)
    if schema == "flights":
        tailnums = _tailnums(_planes(rows))
        weights = 1 / np.arange(1, DESTINATIONS + 1)
        dest_p = weights / weights.sum()
    done, index = 0, 0
    while done < rows:
        n = min(per_file, rows - done)
        path = out / f"part-{index:05d}.parquet"
        writer = None
        for start in range(0, n, row_group):
            m = min(row_group, n - start)
            table = _flights_chunk(rng, m, tailnums, dest_p) if schema == "flights" else \
                _chunk(rng, m, schema, vocabulary)
            writer = writer or pq.ParquetWriter(path, table.schema)
            writer.write_table(table, row_group_size=row_group)
        writer.close()
        done += n
        index += 1


def ensure_data(args: argparse.Namespace) -> Path:
    data = Path(args.data) if args.data else \
        Path(tempfile.gettempdir()) / f"fuzzpy-dask-scale-{args.schema}-{args.rows}"
    stamp = data / "_rows"
    want = f"{args.rows} {args.schema} {args.rows_per_file} {args.row_group}"
    if not (stamp.exists() and stamp.read_text() == want):
        t = time.perf_counter()
        for old in data.glob("*.parquet"):
            old.unlink()
        generate(data, args.rows, args.rows_per_file, args.row_group, args.schema)
        if args.schema == "flights":
            write_planes(planes_file(data), args.rows)
        stamp.write_text(want)  # not a data file: the engines read only .parquet files
        print(f"generated {args.rows:,} rows in {time.perf_counter() - t:.1f} s into {data}", flush=True)
    return data


def planes_file(data: Path) -> Path:
    """The planes of a flights table, beside its directory (the engines read every file in it)."""
    return data.parent / f"{data.name}-planes.parquet"


# ---- the hand-written side (run as a subprocess: `--hand QUERY`) ---------------------------------

def hand_written(query: str, scheduler: str, data: str) -> dict:
    import dask.dataframe as dd
    from distributed import Client

    rng = np.random.default_rng()
    with Client(scheduler) as client:
        if query in FLIGHT_QUERIES:
            return hand_written_flights(query, client, data, rng)
        if query == "count_sum":
            df = dd.read_parquet(data, columns=["age"])
            adults = df[df.age >= 18]
            n, total = client.compute([adults.age.count(), adults.age.clip(17, 90).sum()], sync=True)
            return {"n": float(n) + rng.laplace(0, 10), "total": float(total) + rng.laplace(0, 900)}
        df = dd.read_parquet(data, columns=["education"])
        counts = client.compute(df.education.value_counts(), sync=True)
        return {k: float(counts.get(k, 0)) + rng.laplace(0, 2) for k in EDUCATION}


def _p_one_key_per_plane(part: "pd.DataFrame", seed: int) -> "pd.Series":
    """Planes per destination, each plane counted in one of its destinations (chosen at random)."""
    pairs = part.drop_duplicates()
    return pairs.sample(frac=1, random_state=seed).drop_duplicates("tailnum").dest.value_counts()


def _p_bounded_counts(part: "pd.DataFrame", k: int, seed: int) -> "pd.Series":
    """Flights per destination, at most k random flights of each plane."""
    return part.sample(frac=1, random_state=seed).groupby("tailnum", sort=False).head(k).dest.value_counts()


def _p_truncated(part: "pd.DataFrame", k: int, seed: int) -> "pd.DataFrame":
    """At most k random rows of each tail number."""
    return part.sample(frac=1, random_state=seed).groupby("tailnum", sort=False).head(k)


def _added(counts: list) -> "pd.Series":
    import pandas as pd

    return pd.concat(counts).groupby(level=0).sum() if counts else pd.Series(dtype="int64")


def hand_written_flights(query: str, client, data: str, rng: np.random.Generator) -> dict:
    """The flights queries written by hand in Dask: one shuffle on the plane shared by what needs it."""
    import dask.dataframe as dd
    import pandas as pd
    from dask import delayed

    seed = int(rng.integers(2**31))
    planes = pd.read_parquet(planes_file(Path(data)))
    if query == "units":
        df = dd.read_parquet(data, columns=["tailnum", "dest"]).shuffle(on="tailnum")
        parts = df.to_delayed()
        keys = [delayed(_p_one_key_per_plane)(p, seed + i) for i, p in enumerate(parts)]
        bounded = [delayed(_p_bounded_counts)(p, BOUND_K, seed + i) for i, p in enumerate(parts)]
        out = client.compute(keys + bounded, sync=True)  # one graph: the shuffle is shared
        planes_per_dest, flights_per_dest = _added(out[:len(keys)]), _added(out[len(keys):])
        threshold = 1 + np.log(1 / (2 * 1e-7)) / 0.9
        released = [d for d, n in planes_per_dest.items() if n + rng.laplace(0, 1 / 0.9) >= threshold]
        return {d: float(flights_per_dest.get(d, 0)) + rng.laplace(0, BOUND_K / 0.1) for d in sorted(released)}
    flights = dd.read_parquet(data, columns=["tailnum"])
    if query == "join_public":
        sums = client.compute(flights.merge(planes, on="tailnum").groupby("manufacturer").seats.sum(), sync=True)
        return {m: float(sums.get(m, 0)) + rng.laplace(0, 450) for m in MANUFACTURERS}
    truncated = flights.shuffle(on="tailnum").map_partitions(_p_truncated, TRUNCATE_K, seed, meta=flights._meta)
    one_each = planes.sample(frac=1, random_state=seed).drop_duplicates("tailnum")
    sums = client.compute(truncated.merge(one_each, on="tailnum").groupby("manufacturer").seats.sum(), sync=True)
    return {m: float(sums.get(m, 0)) + rng.laplace(0, 450 / 0.0125) for m in MANUFACTURERS}


# ---- measuring -----------------------------------------------------------------------------------------

def _worker_peak_kib() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _size(piece: tuple, schema_name: str) -> int:
    """Bytes of one partition conformed as the pandas engine holds it (deep: strings included)."""
    import pyarrow.parquet as pq

    from fuzzpy.checking.program import check_source
    from fuzzpy.runtime.data import load_arrow

    report = check_source(program("units" if schema_name == "flights" else "count_sum", schema_name), "size.fz")
    schema = report.table_schema(report.inputs[0])
    path, group = piece
    with open(path, "rb") as fh:
        data = pq.ParquetFile(fh).read_row_group(group, columns=[c.name for c in schema.columns])
    return int(load_arrow(data, schema, table="db").memory_usage(deep=True).sum())


def run_child(cmd: list[str], src: Optional[str] = None) -> tuple[float, int, str]:
    """Run cmd, return (seconds, its peak RSS in KiB, stdout); the peak is read with wait4.  It
    runs in the temporary folder: `python -m` puts its working folder first on the path, so a
    checkout as working folder would shadow the baseline's PYTHONPATH."""
    env = dict(os.environ, PYTHONPATH=src) if src else None
    t = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env, cwd=tempfile.gettempdir())
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{err.read()[-3000:]}")
        return elapsed, usage.ru_maxrss, out.read()


class Cluster:
    """A fresh local cluster per measured run (so each worker's ru_maxrss is that run's peak), or
    an existing scheduler (whose workers' peaks then cover everything they ran before).  A local
    cluster, scheduler included, runs in its own process (`--serve-cluster`), with the side's
    PYTHONPATH: the baseline's graphs are read by a scheduler and workers running its code."""

    def __init__(self, args: argparse.Namespace, src: Optional[str] = None):
        self.args = args
        self.src = src
        self.client = self.proc = None

    def __enter__(self) -> "Cluster":
        from distributed import Client

        a = self.args
        if a.scheduler:
            self.client = Client(a.scheduler)
            return self
        env = dict(os.environ, PYTHONPATH=self.src) if self.src else None
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve-cluster", "--workers", str(a.workers),
                                      "--threads-per-worker", str(a.threads_per_worker), "--memory-limit",
                                      a.memory_limit], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=env)
        address = self.proc.stdout.readline().strip()
        if not address:
            raise SystemExit("the local cluster did not start")
        self.client = Client(address)
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()
        if self.proc is not None:
            self.proc.stdin.close()  # the launcher closes its cluster and exits
            self.proc.wait(timeout=120)

    @property
    def address(self) -> str:
        return self.client.scheduler.address


def serve_cluster(args: argparse.Namespace) -> None:
    """Start a local cluster, print its scheduler's address, keep it until stdin closes."""
    from distributed import LocalCluster

    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=args.threads_per_worker,
                           memory_limit=args.memory_limit, dashboard_address=None, silence_logs=100)
    print(cluster.scheduler_address, flush=True)
    sys.stdin.read()
    cluster.close()


def measure(args: argparse.Namespace, make_cmd, src: Optional[str] = None) -> dict:
    with Cluster(args, src) as c:
        seconds, client_kib, _ = run_child(make_cmd(c.address), src)
        peaks = c.client.run(_worker_peak_kib)
    return {"s": seconds, "client_mib": client_kib / 1024, "worker_mib": max(peaks.values()) / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--schema", choices=[*sorted(SCHEMAS), "flights"], default="narrow")
    ap.add_argument("--rows-per-file", type=int, default=5_000_000)
    ap.add_argument("--row-group", type=int, default=1_000_000)
    ap.add_argument("--data", help="Parquet directory (generated if missing or of another size)")
    ap.add_argument("--generate-only", action="store_true", help="generate the data and stop")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads-per-worker", type=int, default=1)
    ap.add_argument("--memory-limit", default="4GiB", help="per local worker")
    ap.add_argument("--scheduler", help="an existing cluster instead of a local one")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--queries", help="comma-separated (default: count_sum,histogram; with --schema flights: "
                                      f"{','.join(FLIGHT_QUERIES)})")
    ap.add_argument("--sides", default="fuzzpy,fuzzpy --persist,hand-written Dask",
                    help="comma-separated, among: fuzzpy, fuzzpy --persist, hand-written Dask, baseline, "
                         "baseline --persist")
    ap.add_argument("--baseline-src", help="a fuzzpy source tree (e.g. `git archive` of an older commit): the "
                                           "baseline sides run it, client and workers alike")
    ap.add_argument("--no-size", dest="size", action="store_false",
                    help="skip the estimate of the table's size in pandas (one more pass)")
    ap.add_argument("--hand", help=argparse.SUPPRESS)
    ap.add_argument("--serve-cluster", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_cluster:
        serve_cluster(args)
        return
    if args.hand:
        print(json.dumps(hand_written(args.hand, args.scheduler, args.data)))
        return

    if args.queries is None:
        args.queries = ",".join(FLIGHT_QUERIES) if args.schema == "flights" else "count_sum,histogram"
    data = ensure_data(args)
    if args.generate_only:
        return
    on_disk = sum(f.stat().st_size for f in data.glob("*.parquet"))
    with Cluster(args) as c:
        nworkers = len(c.client.scheduler_info()["workers"])
        print(f"{platform.node()} ({os.cpu_count()} cores, "
              f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB), "
              f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, load average {os.getloadavg()[0]:.1f}; "
              f"{args.rows:,} rows ({args.schema} schema), {on_disk / 2**20:.0f} MiB of Parquet; "
              f"{nworkers} workers x {args.threads_per_worker} threads", flush=True)
        if args.size:
            in_pandas = sum(c.client.gather(c.client.map(_size, _pieces_of(data), schema_name=args.schema)))
            print(f"the conformed table in one pandas process: {in_pandas / 2**30:.2f} GiB", flush=True)
    wanted = [x.strip() for x in args.sides.split(",")]
    if any(x.startswith("baseline") for x in wanted) and not args.baseline_src:
        raise SystemExit("the baseline sides need --baseline-src")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.queries.split(","):
            prog = Path(tmp) / f"{name}.fz"
            prog.write_text(program(name, args.schema))
            # a ledger per query: a dataset's default cap is set by its first run, and the units
            # query's delta would not fit the pure epsilon cap a join query set
            ledger = Path(tmp) / f"{name}.sqlite"

            def fuzz_cmd(address: str) -> list[str]:
                return [sys.executable, "-m", "fuzzpy", "run", str(prog), "--engine", "dask", "--scheduler", address,
                        *tables_args(name, data), "--budget", "1000", "--ledger", str(ledger), "--format", "json"]

            def hand_cmd(address: str) -> list[str]:
                return [sys.executable, __file__, "--hand", name, "--scheduler", address, "--data", str(data)]

            every = {"fuzzpy": (fuzz_cmd, None), "fuzzpy --persist": (lambda a: fuzz_cmd(a) + ["--persist"], None),
                     "baseline": (fuzz_cmd, args.baseline_src),
                     "baseline --persist": (lambda a: fuzz_cmd(a) + ["--persist"], args.baseline_src),
                     "hand-written Dask": (hand_cmd, None)}
            sides = {k: every[k] for k in wanted}
            runs: dict[str, list[dict]] = {k: [] for k in sides}
            for _ in range(args.repeat):  # interleaved
                for side, (make, src) in sides.items():
                    runs[side].append(measure(args, make, src))
                    r = runs[side][-1]
                    print(f"  ({name} {side}: {r['s']:.1f} s, worker peak {r['worker_mib']:.0f} MiB, load average "
                          f"{os.getloadavg()[0]:.1f})", flush=True)
            med = {k: {m: statistics.median(r[m] for r in v) for m in ("s", "client_mib", "worker_mib")}
                   for k, v in runs.items()}
            h = med.get("hand-written Dask")
            for side, f in med.items():
                ratio = (f" | time x{f['s'] / h['s']:.2f}  worker memory x{f['worker_mib'] / h['worker_mib']:.2f} "
                         "of hand-written Dask") if h else ""
                print(f"{name:10s} {side:18s} {f['s']:7.1f} s  worker peak {f['worker_mib']:6.0f} MiB  client peak "
                      f"{f['client_mib']:5.0f} MiB{ratio}", flush=True)
            for new, old in (("fuzzpy", "baseline"), ("fuzzpy --persist", "baseline --persist")):
                if new in med and old in med:
                    print(f"{name:10s} {new} against {old}: time x{med[new]['s'] / med[old]['s']:.2f}", flush=True)


def tables_args(query: str, data: Path) -> list[str]:
    """`fuzzpy run`'s data options for a query: the flights queries name their tables."""
    if query not in FLIGHT_QUERIES:
        return ["--data", str(data)]
    planes = str(planes_file(data))
    return ["--data", f"flights={data}", *{"units": ["--delta", "1e-6"], "join_public": ["--public", f"planes={planes}"],
                                          "join_private": ["--data", f"planes={planes}"]}[query]]


def _pieces_of(data: Path) -> list:
    import pyarrow.parquet as pq

    pieces = []
    for f in sorted(str(f) for f in data.glob("*.parquet")):
        pieces.extend((f, g) for g in range(pq.ParquetFile(f).metadata.num_row_groups))
    return pieces


if __name__ == "__main__":
    main()
