"""Throughput, latency and fairness of the curator service (`fuzzpy serve`), on the examples'
Adult sample.

    python benchmarks/serve_speed.py [--requests 200] [--clients 20] [--flood 10] [--only flood] [--spin]

Starts a real server process (SQLite ledger in a temporary folder) and measures, with httpx:
requests per second for a check and for a small run (one noisy count), with 1 client and with
`--clients` concurrent clients; and the latency of a served run against a local one (the same
`fuzzpy run` pipeline in this process, with a ledger of its own, data loaded each time as a
local run does).  Prints each figure and the ratios: concurrent / single throughput, served /
local latency.  Then fairness: the latency of one analyst's check alone, and again while
another analyst floods the service with `--flood` slow checks (about 2 s each, no epsilon) at
once, and then with as many slow runs; prints the ratios loaded / alone (the goal: at most 2).
Needs the serve extra (`pip install -e ".[serve]"` and httpx).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.serve.helpers import ADULT_CSV, ADULT_SCHEMA, COUNT_PROGRAM, Analyst, body, start_server, write_config  # noqa: E402


def throughput(server, token: str, path: str, payload: dict, requests: int, clients: int) -> float:
    """Each client keeps one connection and sends its share of the requests one after another."""
    def client(count: int) -> None:
        with server.client(token) as c:
            for _ in range(count):
                r = c.post(path, json=payload)
                assert r.status_code == 200 and r.json()["exit_code"] == 0, r.text[:300]

    client(1)  # warm: the table cache, the checker's first use
    shares = [requests // clients + (i < requests % clients) for i in range(clients)]
    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, shares))
    return requests / (time.perf_counter() - start)


def served_latency(server, token: str, payload: dict, repeat: int) -> float:
    times = []
    with server.client(token) as c:
        for _ in range(repeat):
            start = time.perf_counter()
            assert c.post("/v1/run", json=payload).json()["exit_code"] == 0
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def local_latency(folder: Path, program: Path, repeat: int) -> float:
    from fuzzpy.interfaces.cli import run_app

    args = ["run", str(program), "--data", str(ADULT_CSV), "--ledger", str(folder / "local.sqlite"),
            "--format", "json"]
    times = []
    for i in range(repeat + 1):
        sink = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stdout(sink):
            assert run_app(args) == 0
        if i:  # the first run pays for imports
            times.append(time.perf_counter() - start)
    return statistics.median(times)


SLOW_CHECK = "schema A { age : num[17, 90] }\n" + "".join(
    f"function f{i} (db : bag A) : fuzzy num {{ sample a = laplace 0.001 (count db); "
    f"sample b = laplace 0.001 (count (filter (fun r -> r.age > {17 + i % 70}) db)); return (a + b) }}\n"
    for i in range(120)) + "function main (db : bag A) : fuzzy num { " + " ".join(
    f"sample x{i} = f{i} db;" for i in range(120)) + " return x0 }\n"
SLOW_RUN = COUNT_PROGRAM.replace("param eps : num = 0.1;", "param eps : num = 0.001;").replace(
    "return n", "return (n + fib 29)").replace("function main", "function fib (n : int) : int "
                                             "{ if n < 2 then n else fib (n - 1) + fib (n - 2) }\nfunction main")


SPIN = "--spin" in sys.argv  # the flood resends a refused request at once, from this machine's CPUs


def victim_latency(server, token: str, repeat: int) -> float:
    times = []
    with server.client(token) as c:
        for _ in range(repeat):
            start = time.perf_counter()
            r = c.post("/v1/check", json=body(COUNT_PROGRAM))
            assert r.status_code == 200 and r.json()["exit_code"] == 0, r.text[:300]
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def flooded(server, victim: str, flooder: str, program: str, path: str, flood: int,
            repeat: int) -> tuple[float, Counter]:
    """The victim's check latency while the flooder keeps `flood` slow requests in flight, and the
    flooder's answers by status (200 served, 429 refused beyond its queue)."""
    import threading

    stop = threading.Event()
    answers: Counter = Counter()

    def flood_one() -> None:
        # Each flooding thread keeps one request in flight; refused beyond its queue (429), it sends
        # again a second later (the flooder's traffic, not this benchmark's own CPU, is measured).
        with server.client(flooder) as c:
            while not stop.is_set():
                status = c.post(path, json=body(program)).status_code
                answers[status] += 1
                if status == 429 and not SPIN:
                    stop.wait(1.0)

    threads = [threading.Thread(target=flood_one, daemon=True) for _ in range(flood)]
    for t in threads:
        t.start()
    time.sleep(3.0)  # the flood is in the workers and the queue
    try:
        return victim_latency(server, victim, repeat), answers
    finally:
        stop.set()
        for t in threads:
            t.join(120)


def fairness(folder: Path, flood: int, repeat: int) -> list[tuple[str, float, float, Counter]]:
    """(what floods, victim alone, victim during the flood, the flooder's answers), with the
    service's default limits."""
    victim, flooder = Analyst("victim", caps={"adult": "1000"}), Analyst("flooder", caps={"adult": "1000000"})
    config = write_config(folder, "fair.sqlite", {"adult": (ADULT_CSV, ADULT_SCHEMA, "1000000")}, [victim, flooder])
    server = start_server(config)
    try:
        victim_latency(server, victim.token, 10)  # warm: every worker has loaded the checker
        rows = []
        for what, program, path in (("slow checks", SLOW_CHECK, "/v1/check"), ("slow runs", SLOW_RUN, "/v1/run")):
            # alone before and after the flood (the machine's load drifts): their median is the baseline
            before = victim_latency(server, victim.token, repeat)
            loaded, answers = flooded(server, victim.token, flooder.token, program, path, flood, repeat)
            after = victim_latency(server, victim.token, repeat)
            rows.append((what, statistics.median([before, after]), loaded, answers))
        return rows
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--flood", type=int, default=10, help="slow requests the flooding analyst keeps in flight")
    parser.add_argument("--only", choices=["flood"], help="measure fairness only")
    parser.add_argument("--spin", action="store_true", help="the flood resends a refused request at once")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="fuzzpy-serve-bench-"))
    if args.only != "flood":
        throughput_and_latency(folder, args)
    print(f"fairness: one analyst's check (median of {args.repeat}) alone and while another keeps "
          f"{args.flood} slow requests in flight (default per-analyst limits)")
    for what, alone, loaded, answers in fairness(folder, args.flood, args.repeat):
        print(f"  flood of {what:11s}: alone {1000 * alone:7.1f} ms, flooded {1000 * loaded:7.1f} ms, "
              f"ratio flooded / alone: {loaded / alone:.2f}  (the flood's answers: "
              f"{', '.join(f'{n} x {status}' for status, n in sorted(answers.items()))})")


def throughput_and_latency(folder: Path, args: argparse.Namespace) -> None:
    who = Analyst("bench", caps={"adult": "1000000"})
    # One analyst sends every request here: let it use every worker and queue all its clients.
    config = write_config(folder, "ledger.sqlite", {"adult": (ADULT_CSV, ADULT_SCHEMA, "1000000")}, [who],
                          max_concurrent_runs=args.clients, max_concurrent_checks=args.clients,
                          per_analyst=args.clients, queue_per_analyst=2 * args.clients, queue_seconds=300)
    program = folder / "count.fz"
    program.write_text(COUNT_PROGRAM)
    payload = body(COUNT_PROGRAM)
    server = start_server(config)
    try:
        rows = []
        for path, what in (("/v1/check", "check"), ("/v1/run", "small run")):
            one = throughput(server, who.token, path, payload, args.requests, 1)
            many = throughput(server, who.token, path, payload, args.requests, args.clients)
            rows.append((what, one, many))
        served = served_latency(server, who.token, payload, args.repeat)
    finally:
        server.stop()
    local = local_latency(folder, program, args.repeat)
    print(f"requests per second ({args.requests} requests; checks and runs on the server's worker processes)")
    for what, one, many in rows:
        print(f"  {what:10s}  1 client: {one:7.1f}/s   {args.clients} clients: {many:7.1f}/s   "
              f"ratio {args.clients} / 1: {many / one:.2f}")
    print(f"latency of a small run (median of {args.repeat}): served {1000 * served:.1f} ms, "
          f"local {1000 * local:.1f} ms, ratio served / local: {served / local:.2f}")


if __name__ == "__main__":
    main()
