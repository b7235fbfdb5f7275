"""Nothing but fuzzpy's own output on stdout, parsed strictly, in real processes.

HiGHS prints a banner on stdout from C++ the first time a process solves an LP (whatever
msg=False says); CliRunner captures only Python's sys.stdout and would never see it.  So these
tests start `fuzzpy` as a process, on programs that need the LP, and parse the whole of stdout:
`json.loads` on JSON and SARIF, and strict Content-Length framing on the language server's
stream (the client of .ci/smoke.py, which CI also uses).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SAMPLE = EXAMPLES / "data" / "adult_sample.csv"
CLI = [sys.executable, "-m", "fuzzpy.interfaces.cli"]
HANG_GUARD = 180  # seconds; a guard against hangs, not a speed assertion
NEEDS_LP = ["cdf", "decision_tree", "kmeans"]


def _smoke():
    if "fuzzpy_smoke" not in sys.modules:
        spec = importlib.util.spec_from_file_location("fuzzpy_smoke", ROOT / ".ci" / "smoke.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["fuzzpy_smoke"] = module
        spec.loader.exec_module(module)
    return sys.modules["fuzzpy_smoke"]


def fuzzpy(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=ROOT, timeout=HANG_GUARD, env=env)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_the_examples_named_here_really_solve_an_lp():
    from fuzzpy.checking.program import check_file

    for name in NEEDS_LP:
        assert check_file(EXAMPLES / f"{name}.fz").lp_solves > 0 or _solves_in_a_fresh_process(name), name


def _solves_in_a_fresh_process(name: str) -> bool:
    code = ("import sys; from fuzzpy.checking.program import check_file; "
            f"sys.exit(0 if check_file({str(EXAMPLES / (name + '.fz'))!r}).lp_solves > 0 else 1)")
    return subprocess.run([sys.executable, "-c", code], timeout=HANG_GUARD).returncode == 0


@pytest.mark.parametrize("name", NEEDS_LP)
def test_check_json_is_exactly_one_json_value(name):
    done = fuzzpy("check", str(EXAMPLES / f"{name}.fz"), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert _smoke().strict_json(done.stdout)["ok"] is True


def test_check_sarif_and_folder_json_are_strict_json():
    sarif = fuzzpy("check", "examples", "--format", "sarif")
    assert sarif.returncode == 0, sarif.stderr
    assert _smoke().strict_json(sarif.stdout)["version"] == "2.1.0"
    folder = fuzzpy("check", "examples", "--format", "json")
    assert [f["ok"] for f in _smoke().strict_json(folder.stdout)["files"]] == [True] * len(list(EXAMPLES.rglob("*.fz")))  # schemas/ too


@pytest.mark.parametrize("name", sorted(p.stem for p in EXAMPLES.glob("*.fz")))
def test_python_m_fuzzpy_check_json_is_exactly_one_json_value_for_every_example(name):
    """`python -m fuzzpy` is the same command line as the `fuzzpy` script."""
    done = subprocess.run([sys.executable, "-m", "fuzzpy", "check", "--format", "json", str(EXAMPLES / f"{name}.fz")],
                          capture_output=True, text=True, cwd=ROOT, timeout=HANG_GUARD)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert _smoke().strict_json(done.stdout)["ok"] is True


@pytest.mark.parametrize("name", ["cdf", "kmeans"])
def test_run_json_is_exactly_one_json_value(name):
    data = EXAMPLES / "data" / ("points.csv" if name == "kmeans" else "adult_sample.csv")
    done = fuzzpy("run", str(EXAMPLES / f"{name}.fz"), "--data", str(data), "--budget", "1", "--seed", "1",
                  "--format", "json")
    assert done.returncode == 0, done.stderr
    out = _smoke().strict_json(done.stdout)
    assert out["ok"] is True and out["releases"]


def test_the_solvers_banner_reaches_neither_stream():
    done = fuzzpy("check", "--no-cache", str(EXAMPLES / "cdf.fz"))
    assert done.returncode == 0
    assert "HiGHS" not in done.stdout and "HiGHS" not in done.stderr
    assert done.stdout.startswith(f"{EXAMPLES / 'cdf.fz'}: ok")


def test_strict_json_refuses_what_python_accepts_by_default():
    smoke = _smoke()
    for text in ["NaN", '{"a": Infinity}', '[-Infinity]', 'Running HiGHS\n{"a": 1}', '{"a": 1}\nmore']:
        with pytest.raises(ValueError):
            smoke.strict_json(text)


# ---- the language server ---------------------------------------------------------------------------


def test_the_language_server_answers_a_strict_client_on_a_program_that_needs_the_lp():
    diagnostics, stderr = _smoke().lsp_round_trip([*CLI, "lsp"], EXAMPLES / "decision_tree.fz")
    assert diagnostics == []
    assert b"Traceback" not in stderr


def test_the_strict_client_refuses_a_line_outside_a_frame():
    import io

    smoke = _smoke()
    good = b'Content-Length: 17\r\n\r\n{"jsonrpc":"2.0"}'
    assert smoke.read_frame(io.BytesIO(good)) == {"jsonrpc": "2.0"}
    for bad in [b"Running HiGHS 1.16.0\n" + good, b"Content-Type: x\r\n\r\n{}", b"Content-Length: 99\r\n\r\n{}",
                b'Content-Length: 2\r\n\r\n[]', b'Content-Length: 3\r\n\r\nNaN']:
        with pytest.raises((smoke.ProtocolError, ValueError)):
            smoke.read_frame(io.BytesIO(bad))


NOISY_SITECUSTOMIZE = textwrap.dedent("""\
    # Started in the server process: once descriptor 1 no longer is the stdout it started with
    # (the server reserved it), write to it from C-level, Python-level and a subprocess, many times.
    import os, subprocess, sys, threading, time

    _start = os.fstat(1)

    def _noise():
        while (os.fstat(1).st_ino, os.fstat(1).st_dev) == (_start.st_ino, _start.st_dev):
            time.sleep(0.005)
        for i in range(20):
            os.write(1, b"noise from a library at descriptor level\\n")
            print("noise from print()", flush=True)
            time.sleep(0.01)
        # The server points descriptor 1 at /dev/null for a moment around each LP solve, so
        # noise written then is discarded, as designed.  The lines the test looks for are
        # written under the redirection lock, when descriptor 1 is stderr for sure.
        from fuzzpy.stdio import _LOCK
        with _LOCK:
            subprocess.run([sys.executable, "-c", "print('noise from a child process')"])
            os.write(1, b"NOISE-DONE\\n")
        open(os.path.join(os.path.dirname(__file__), "noise-done"), "w").close()

    threading.Thread(target=_noise, daemon=True).start()
    """)


def test_nothing_printed_on_stdout_during_the_servers_life_reaches_the_protocol(tmp_path):
    import os

    (tmp_path / "sitecustomize.py").write_text(NOISY_SITECUSTOMIZE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    smoke = _smoke()
    client = smoke.StrictLspClient([*CLI, "lsp"], cwd=ROOT, env=env)
    try:
        program = EXAMPLES / "cdf.fz"
        uri = smoke.file_uri(program)
        client.request("initialize", {"processId": None, "rootUri": smoke.file_uri(ROOT), "capabilities": {}})
        client.notify("initialized", {})
        client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "fuzzpy", "version": 1,
                                                                "text": program.read_text()}})
        published = client.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics")
        assert published["params"]["diagnostics"] == []
        hover = client.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                      "position": {"line": 0, "character": 0}})
        assert hover is None or isinstance(hover, dict)
        deadline = time.monotonic() + HANG_GUARD
        while not (tmp_path / "noise-done").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                     "position": {"line": 0, "character": 0}}) == hover
        assert client.finish() == 0
    finally:
        client.kill()
    assert b"NOISE-DONE" in client.stderr and b"noise from a child process" in client.stderr


# ---- the redirection itself ----------------------------------------------------------------------------

REDIRECT_PROBE = textwrap.dedent("""\
    import ctypes, os, sys, threading
    from fuzzpy.stdio import stdout_to_stderr

    libc = ctypes.CDLL(None)
    print("before", flush=True)
    with stdout_to_stderr():
        libc.printf(b"c-printf-inside\\n")          # buffered by C stdio, flushed on exit
        os.write(1, b"fd-write-inside\\n")
        print("print-inside")                        # buffered by Python, flushed on exit
    try:
        with stdout_to_stderr():
            raise KeyError("x")
    except KeyError:
        pass

    def worker():
        for _ in range(50):
            with stdout_to_stderr():
                os.write(1, b"thread-inside\\n")

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads: t.start()
    for t in threads: t.join()
    print("after", flush=True)
    libc.printf(b"c-printf-after\\n")
    libc.fflush(None)
    """)


def test_stdout_to_stderr_moves_c_python_and_threaded_writes_and_restores(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(REDIRECT_PROBE)
    done = subprocess.run([sys.executable, str(probe)], capture_output=True, text=True, cwd=ROOT, timeout=HANG_GUARD)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["before", "after", "c-printf-after"]
    assert done.stderr.count("thread-inside") == 200
    for text in ("c-printf-inside", "fd-write-inside", "print-inside"):
        assert text in done.stderr


DISCARD_PROBE = textwrap.dedent("""\
    import ctypes, os
    from fuzzpy.stdio import stdout_discarded

    libc = ctypes.CDLL(None)
    print("before", flush=True)
    with stdout_discarded():
        libc.printf(b"c-printf-inside\\n")
        os.write(1, b"fd-write-inside\\n")
        print("print-inside")
    print("after", flush=True)
    """)


def test_stdout_discarded_drops_c_and_python_writes_and_restores(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(DISCARD_PROBE)
    done = subprocess.run([sys.executable, str(probe)], capture_output=True, text=True, cwd=ROOT, timeout=HANG_GUARD)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["before", "after"]
    assert "inside" not in done.stderr
