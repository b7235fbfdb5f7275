"""The peer process (fuzzpy/interfaces/lsp/peer.py): a full check in two halves, one checked in a
second process, gives exactly a plain full check's diagnostics; every failure of the peer falls
back to checking its half in the server; the peer ends with the server."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from benchmarks.lsp_latency import generate
from fuzzpy.checking.program import check_source
from fuzzpy.interfaces.lsp import IncrementalChecker, Settings, incremental, make_executor
from fuzzpy.interfaces.lsp import peer as peer_module
from fuzzpy.interfaces.lsp.incremental import RunJob, two_groups
from fuzzpy.interfaces.lsp.peer import Peer
from fuzzpy.pipeline import budget as R

READY_WITHIN = 120  # seconds for a peer to start and warm up on a loaded machine (a hang guard)


@pytest.fixture(autouse=True)
def spare_core(monkeypatch):
    """The tests run on loaded machines: the peer is used whatever the load average."""
    monkeypatch.setattr(peer_module, "core_to_spare", lambda: True)


@pytest.fixture(scope="module")
def peer():
    peer = Peer()
    peer.start()
    assert peer.wait_ready(READY_WITHIN)
    yield peer
    peer.close()


@pytest.fixture(scope="module")
def executor():
    executor = make_executor()
    yield executor
    executor.shutdown()


def full_check(text: str, file: str, params: dict | None = None, overlays: dict | None = None):
    report = check_source(text, file, params, "main", overlays)
    R.apply_budget(report, None)
    return report


def comparable(diags) -> list:
    return sorted((d.code, d.message, str(d.span), tuple(d.notes), d.severity) for d in diags)


def mechanisms(report) -> list:
    return sorted((str(m.span), m.name, m.sensitivity, m.epsilon, m.scale) for m in report.mechanisms)


def assert_same_as_full(analysis, full, what: str) -> None:
    assert comparable(analysis.report.diagnostics) == comparable(full.diagnostics), what
    assert analysis.report.epsilon == full.epsilon, what
    assert mechanisms(analysis.report) == mechanisms(full), what
    assert sorted(f.name for f in analysis.report.functions) == sorted(f.name for f in full.functions), what


def engine_with(peer: Peer) -> IncrementalChecker:
    engine = IncrementalChecker()
    engine.peer = peer
    return engine


def with_eps(text: str, value: str) -> str:
    return text.replace("param eps : num = 0.01;", f"param eps : num = {value};")


# ---- splitting ----------------------------------------------------------------------------------


def test_the_benchmark_program_splits_into_two_halves_of_about_equal_cost(executor):
    text, file = generate(100), "/tmp/split.fz"
    engine, settings = IncrementalChecker(), Settings()
    modules, _, texts, _ = incremental._load(text, file, settings, None)
    plan = engine._plan(text, file, settings, modules, texts)
    groups = two_groups(plan, "main")
    assert groups is not None and "main" in groups[0]
    assert groups[0] | groups[1] == set(plan.units) and not groups[0] & groups[1]
    costs = [len(frozenset().union(*(plan.closure[u] for u in g))) for g in groups]
    assert abs(costs[0] - costs[1]) <= 2, costs


CALLING_EACH_OTHER = textwrap.dedent("""\
    schema Adult { age : num[17, 90] }
    param eps : num = 0.1;

    function a (db : bag Adult) : num { count db + b db }

    function b (db : bag Adult) : num { c db }

    function c (db : bag Adult) : num { count db }

    function main (db : bag Adult) : fuzzy num {
      sample x = laplace eps (a db);
      return x
    }
    """)


def test_a_file_whose_units_all_call_each_other_is_one_group_checked_without_the_peer(tmp_path, executor,
                                                                                        monkeypatch):
    monkeypatch.setattr(incremental, "SPLIT_WORTH", 1.0)  # no group too large to be worth it
    engine, settings = IncrementalChecker(), Settings()
    modules, _, texts, _ = incremental._load(CALLING_EACH_OTHER, "/tmp/c.fz", settings, None)
    assert two_groups(engine._plan(CALLING_EACH_OTHER, "/tmp/c.fz", settings, modules, texts), "main") is None
    handed = []
    fake = Peer()
    fake.submit = handed.append  # type: ignore[method-assign]
    engine, file = engine_with(fake), str(tmp_path / "chain.fz")
    for i, text in enumerate([CALLING_EACH_OTHER, CALLING_EACH_OTHER.replace("0.1", "0.2")]):
        analysis = executor.submit(engine.analyse, text, file, Settings()).result()
        assert analysis.full and not analysis.peer
        assert_same_as_full(analysis, full_check(text, file), f"version {i}")
    assert handed == []  # no group was ever handed to the peer


# ---- two halves equal a full check --------------------------------------------------------------


def test_two_halves_equal_a_full_check_on_the_benchmark_program(peer, executor, tmp_path):
    text, file = generate(100), str(tmp_path / "big.fz")
    engine = engine_with(peer)
    for i, value in enumerate(["0.01", "0.02", "0.5", "0.0101"]):  # 0.5: over the pragma's budget
        edited = with_eps(text, value)
        analysis = executor.submit(engine.analyse, edited, file, Settings()).result()
        assert analysis.full and analysis.peer and analysis.runs == 2, f"value {value}"
        assert file in engine.shown_to_peer  # parsed ahead by the peer at the first check
        assert_same_as_full(analysis, full_check(edited, file), f"value {value}")
        if i == 2:
            assert any(d.code.startswith("E") for d in analysis.report.diagnostics)  # over budget


LIBRARY = textwrap.dedent("""\
    schema Adult { age : num[17, 90], hours : num[1, 99] }

    function adults (db : bag Adult) { filter (fun r -> r.age >= 18) db }

    function hours (db : bag Adult) : num { sum (map (fun r -> clip 0 50 r.hours) db) }
    """)

MAIN_FILE = textwrap.dedent("""\
    # fuzzpy: budget 2
    import "lib.fz";
    param eps : num = 0.1;

    function f1 (db : bag Adult) : fuzzy num {
      sample x = laplace eps (count (adults db));
      return x
    }

    function f2 (db : bag Adult) : fuzzy num {
      sample x = laplace eps (hours db);
      return x
    }

    function f3 (db : bag Adult) : num { count db }

    function f4 (db : bag Adult) : num { count dbb }

    function f5 (db : bag Adult) : num {
      count db +
    }

    function f6 x { x + x }

    function main (db : bag Adult) : fuzzy num {
      sample a = f1 db;
      sample b = laplace eps (f6 (count db));
      return a + b
    }
    """)


@pytest.mark.parametrize("case", ["file", "params", "overlay", "library"])
def test_two_halves_equal_a_full_check_with_imports_overlays_params_and_broken_chunks(
        peer, executor, tmp_path, monkeypatch, case):
    """An imported file (or its unsaved text in the editor: an overlay), a param given by the
    settings, an unknown name (E0201 lists every function), a chunk that does not parse, a
    generic function, and a file without the entry point (a library: both halves synthetic)."""
    monkeypatch.setattr(incremental, "SPLIT_WORTH", 1.0)  # small programs: split anyway
    (tmp_path / "lib.fz").write_text(LIBRARY)
    file = str(tmp_path / "prog.fz")
    text, settings, overlays = MAIN_FILE, Settings(), None
    if case == "params":
        settings.params = {"eps": "0.3"}
    if case == "overlay":
        overlays = {str(tmp_path / "lib.fz"): LIBRARY.replace("clip 0 50", "clip 0 70")}
    if case == "library":
        text = MAIN_FILE[:MAIN_FILE.index("function main")]
    engine = engine_with(peer)
    for version in (text, text.replace("eps : num = 0.1", "eps : num = 0.7")):
        analysis = executor.submit(engine.analyse, version, file, settings, overlays).result()
        assert analysis.full and analysis.peer, case
        if case == "library":  # checked as the editor checks a library: with an entry that charges nothing
            full = check_source(incremental._with_synthetic_entry(version), file, settings.params,
                                incremental.SYNTHETIC_ENTRY, overlays)
        else:
            full = check_source(version, file, settings.params, "main", overlays)
        R.apply_budget(full, None)
        assert comparable(analysis.report.diagnostics) == comparable(full.diagnostics), case
        assert mechanisms(analysis.report) == mechanisms(full), case
        assert {d.code for d in analysis.report.diagnostics} >= {"E0201"}, case


def test_on_a_busy_machine_the_check_runs_in_one_piece(peer, executor, tmp_path, monkeypatch):
    """With the load average at the number of cores or above, there is no core to spare."""
    monkeypatch.undo()  # the real `core_to_spare`
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (2.5, 1.0, 1.0))
    assert not peer_module.core_to_spare()
    text, file = with_eps(generate(30), "0.08"), str(tmp_path / "busy.fz")
    analysis = executor.submit(engine_with(peer).analyse, text, file, Settings()).result()
    assert analysis.full and not analysis.peer
    assert_same_as_full(analysis, full_check(text, file), "busy")
    monkeypatch.setattr(os, "getloadavg", lambda: (0.4, 1.0, 1.0))
    assert peer_module.core_to_spare()


# ---- when the peer fails, its half is checked here ----------------------------------------------


def test_a_peer_that_is_not_running_is_started_and_the_check_runs_here(executor, tmp_path):
    fresh = Peer()  # never started
    try:
        text, file = with_eps(generate(30), "0.03"), str(tmp_path / "a.fz")
        analysis = executor.submit(engine_with(fresh).analyse, text, file, Settings()).result()
        assert analysis.full and not analysis.peer
        assert_same_as_full(analysis, full_check(text, file), "not running")
        assert fresh.starts == 1 and fresh.wait_ready(READY_WITHIN)
        again = with_eps(text, "0.04")
        analysis = executor.submit(engine_with(fresh).analyse, again, file, Settings()).result()
        assert analysis.peer
        assert_same_as_full(analysis, full_check(again, file), "started")
    finally:
        fresh.close()


def test_a_peer_killed_while_idle_or_while_checking_is_replaced_and_nothing_is_lost(executor, tmp_path):
    victim = Peer()
    victim.start()
    try:
        assert victim.wait_ready(READY_WITHIN)
        engine, file, text = engine_with(victim), str(tmp_path / "k.fz"), generate(30)
        first = victim.pid
        os.kill(first, signal.SIGKILL)  # while idle
        _wait_dead(first)
        edited = with_eps(text, "0.05")
        analysis = executor.submit(engine.analyse, edited, file, Settings()).result()
        assert not analysis.peer
        assert_same_as_full(analysis, full_check(edited, file), "killed while idle")
        assert victim.pid != first and victim.wait_ready(READY_WITHIN)

        submit = victim.submit

        def submit_then_kill(job: RunJob):
            ticket = submit(job)
            os.kill(victim.pid, signal.SIGKILL)  # while checking the half just handed over
            return ticket

        victim.submit = submit_then_kill  # type: ignore[method-assign]
        second = victim.pid
        edited = with_eps(text, "0.06")
        analysis = executor.submit(engine.analyse, edited, file, Settings()).result()
        assert not analysis.peer
        assert_same_as_full(analysis, full_check(edited, file), "killed while checking")
        assert victim.pid not in (first, second)
        assert not _alive(first) and not _alive(second)  # never more than one peer
    finally:
        victim.close()


def test_a_peer_slower_than_the_time_limit_is_replaced_and_its_half_checked_here(executor, tmp_path,
                                                                                   monkeypatch):
    slow = Peer()
    slow.start()
    try:
        assert slow.wait_ready(READY_WITHIN)
        monkeypatch.setattr(peer_module, "PEER_MIN_WAIT", 0.0)
        monkeypatch.setattr(peer_module, "PEER_WAIT_FACTOR", 0.0)  # any wait is too long
        before, file = slow.pid, str(tmp_path / "s.fz")
        text = with_eps(generate(30), "0.07")
        analysis = executor.submit(engine_with(slow).analyse, text, file, Settings()).result()
        assert not analysis.peer
        assert_same_as_full(analysis, full_check(text, file), "too slow")
        assert slow.pid != before and slow.starts == 2
        assert not _alive(before)  # never more than one peer
    finally:
        slow.close()


def test_a_peer_that_never_gets_ready_is_given_up_after_a_few_tries(monkeypatch):
    monkeypatch.setattr(peer_module, "_BOOT", "raise SystemExit(3)")  # dies at once, every time
    doomed = Peer()
    doomed.start()
    try:
        job = RunJob(CALLING_EACH_OTHER, "/tmp/d.fz", {}, "main", None, None, None)
        for _ in range(4 * peer_module.MAX_FAILURES):
            if doomed.process is not None:
                doomed.process.wait(30)
            assert doomed.submit(job) is None
        assert doomed.closed and doomed.starts == peer_module.MAX_FAILURES + 1
        assert doomed.process is None
    finally:
        doomed.close()


def test_a_peer_that_cannot_be_started_leaves_the_check_on_one_core(monkeypatch, executor, tmp_path):
    def no_processes(*args, **kwargs):
        raise OSError("no processes here")

    monkeypatch.setattr(peer_module.subprocess, "Popen", no_processes)
    absent = Peer()
    absent.start()
    assert absent.closed and absent.process is None
    text, file = with_eps(generate(30), "0.011"), str(tmp_path / "absent.fz")
    analysis = executor.submit(engine_with(absent).analyse, text, file, Settings()).result()
    assert not analysis.peer
    assert_same_as_full(analysis, full_check(text, file), "no peer")


def test_an_error_in_the_peer_gives_no_result_and_the_peer_goes_on(peer, executor):
    broken = RunJob(CALLING_EACH_OTHER, "/tmp/e.fz", {}, "main", None, None, 5)  # type: ignore[arg-type]
    ticket = peer.submit(broken)
    assert ticket is not None
    assert peer.result(ticket, 0.0) is None
    good = RunJob(CALLING_EACH_OTHER, "/tmp/e.fz", {}, "main", None, None, None)
    ticket = peer.submit(good)
    result = peer.result(ticket, 0.0)
    assert result is not None and result.entry is not None and result.entry.entry == "main"


def test_a_superseded_version_leaves_the_peer_busy_only_briefly(peer, executor, tmp_path, monkeypatch):
    """A newer version stops the wait for the peer's half (nothing published); the next check
    finds the peer free, or replaces it when the stale half keeps it busy."""
    engine, file, text = engine_with(peer), str(tmp_path / "sup.fz"), generate(100)
    stale = executor.submit(engine.analyse, with_eps(text, "0.011"), file, Settings(), None, lambda: True).result()
    assert stale is None
    newer = with_eps(text, "0.012")
    analysis = executor.submit(engine.analyse, newer, file, Settings()).result()
    assert_same_as_full(analysis, full_check(newer, file), "after a superseded version")
    assert peer.pending is None  # its stale half was waited for (or, on a loaded machine, it was replaced)

    assert peer.wait_ready(READY_WITHIN)
    monkeypatch.setattr(peer_module, "BUSY_WAIT", 0.0)  # the stale half is never waited for
    starts, busy = peer.starts, peer.pid
    assert executor.submit(engine.analyse, with_eps(text, "0.013"), file, Settings(), None,
                           lambda: True).result() is None
    newest = with_eps(text, "0.014")
    analysis = executor.submit(engine.analyse, newest, file, Settings()).result()
    assert not analysis.peer and peer.starts == starts + 1
    assert_same_as_full(analysis, full_check(newest, file), "after replacing a busy peer")
    assert peer.wait_ready(READY_WITHIN)
    assert not _alive(busy)  # never more than one peer


def _wait_dead(pid: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.01)


def _alive(pid: int) -> bool:
    """Whether the process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


# ---- the setting, and the peer ending with the server -------------------------------------------


def test_on_a_busy_machine_the_peer_starts_at_the_first_check_that_finds_a_core_free(monkeypatch, executor,
                                                                                       tmp_path):
    from fuzzpy.interfaces.lsp import server

    monkeypatch.setattr(peer_module, "core_to_spare", lambda: False)
    late = server.start_peer(True)
    monkeypatch.setattr(peer_module, "core_to_spare", lambda: True)  # a core got free
    try:
        assert late is not None and late.process is None  # not started with the server
        text, file = with_eps(generate(30), "0.09"), str(tmp_path / "late.fz")
        analysis = executor.submit(engine_with(late).analyse, text, file, Settings()).result()
        assert not analysis.peer and late.starts == 1 and late.failures == 0
        assert_same_as_full(analysis, full_check(text, file), "first check, peer starting")
        assert late.wait_ready(READY_WITHIN)
    finally:
        late.close()


def test_the_peer_option_turns_it_off():
    assert Settings().peer and Settings.from_options({}).peer
    assert not Settings.from_options({"peer": False}).peer


def test_fuzzpy_lsp_no_peer_passes_the_choice_to_the_server(monkeypatch):
    from typer.testing import CliRunner

    import fuzzpy.interfaces.lsp as lsp
    from fuzzpy.interfaces.cli import app

    calls: list[dict] = []
    monkeypatch.setattr(lsp, "main", lambda **options: calls.append(options))
    for args in (["lsp"], ["lsp", "--no-peer"]):
        done = CliRunner().invoke(app, args)
        assert done.exit_code == 0, done.output
    assert calls == [{"peer": True}, {"peer": False}]


def _smoke():
    import importlib.util

    if "fuzzpy_smoke" not in sys.modules:
        spec = importlib.util.spec_from_file_location("fuzzpy_smoke", ROOT / ".ci" / "smoke.py")
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules["fuzzpy_smoke"] = module
        spec.loader.exec_module(module)  # type: ignore[union-attr]
    return sys.modules["fuzzpy_smoke"]


ROOT = Path(__file__).resolve().parents[2]
SERVER = [sys.executable, "-m", "fuzzpy.interfaces.cli", "lsp", "--log-level", "info"]
# The server with its peer used whatever the load average (the tests run on loaded machines).
SERVER_USING_ITS_PEER = [sys.executable, "-c", textwrap.dedent("""\
    import logging
    logging.basicConfig(level=logging.INFO, format="fuzzpy-lsp %(levelname)s %(message)s")
    from fuzzpy.interfaces.lsp import main, peer
    peer.core_to_spare = lambda: True
    main()
    """)]
linux_only = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")


def children_of(pid: int) -> list[int]:
    """The live processes whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def idle(pid: int) -> bool:
    """Whether the process used no CPU time for 0.3 s (the peer has warmed up)."""
    def ticks() -> int:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime
    before = ticks()
    time.sleep(0.3)
    return ticks() == before


def wait_for(condition, timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def start_server(tmp_path: Path, *flags: str, options: dict | None = None, command: list[str] = SERVER):
    client = _smoke().StrictLspClient([*command, *flags], cwd=ROOT)
    client.request("initialize", {"processId": os.getpid(), "rootUri": None, "capabilities": {},
                                  "initializationOptions": options or {}})
    client.notify("initialized", {})
    return client


def open_and_check(client, path: Path, text: str, version: int = 1) -> dict:
    uri = "file://" + path.as_posix()
    if version == 1:
        path.write_text(text)
        client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "fuzzpy",
                                                                "version": 1, "text": text}})
    else:
        client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                                 "contentChanges": [{"text": text}]})
    return client.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                       and m["params"].get("version") == version)


@linux_only
def test_the_server_uses_its_peer_for_a_params_new_value_and_ends_it_at_exit(tmp_path):
    client = start_server(tmp_path, command=SERVER_USING_ITS_PEER)
    try:
        server = client.proc.pid
        assert wait_for(lambda: len(children_of(server)) == 1)  # one peer, started with the server
        peer_pid = children_of(server)[0]
        assert wait_for(lambda: idle(peer_pid), 120)  # warmed up, waiting for work
        text, path = generate(30), tmp_path / "p.fz"
        published = open_and_check(client, path, text)
        for version in range(2, 6):
            published = open_and_check(client, path, with_eps(text, f"0.0{version:03d}"), version)
            assert published["params"]["diagnostics"] == []
        assert children_of(server) == [peer_pid]  # never more than one
        assert client.finish() == 0
    finally:
        client.kill()
    assert not _alive(peer_pid), "the peer outlived the server"  # ended before the server exits
    assert b"one in the peer, full" in client.stderr


@linux_only
def test_the_peer_ends_by_itself_when_the_server_is_killed(tmp_path):
    client = start_server(tmp_path, command=SERVER_USING_ITS_PEER)
    try:
        server = client.proc.pid
        assert wait_for(lambda: len(children_of(server)) == 1)
        peer_pid = children_of(server)[0]
        os.kill(server, signal.SIGKILL)
        client.proc.wait()
    finally:
        client.kill()
    assert wait_for(lambda: not _alive(peer_pid), 30), "the peer outlived the killed server"


@linux_only
@pytest.mark.parametrize("how", ["--no-peer", "option"])
def test_no_peer_with_no_peer_or_the_option_off(tmp_path, how):
    flags, options = ((how,), None) if how == "--no-peer" else ((), {"peer": False})
    client = start_server(tmp_path, *flags, options=options)
    try:
        open_and_check(client, tmp_path / "n.fz", CALLING_EACH_OTHER)
        assert wait_for(lambda: children_of(client.proc.pid) == [], 10)
        assert client.finish() == 0
    finally:
        client.kill()
