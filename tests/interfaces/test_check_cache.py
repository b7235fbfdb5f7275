"""The on-disk check cache (fuzzpy/checking/cache.py) and the typer-free `fuzzpy check`
(fuzzpy/interfaces/checkcmd.py).

A hit must give exactly the checker's answer; every input the answer depends on must miss the
cache when it changes; an entry not written with this user's key, a damaged one, or a folder
others can write must never be trusted.  No timing is asserted here (benchmarks/check_speed.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from fuzzpy.checking import cache
from fuzzpy.interfaces import checkcmd
from fuzzpy.pipeline import budget as R
from fuzzpy.render.report import report_json, report_text

LIB = "function twice (x : num) : num { 2 * x }\n"
PROG = """# fuzzpy: budget 1
import "lib.fz"
schema T { x : num[0, 10] }
param eps : num = 0.5;
function main (db : bag T) : fuzzy num {
  laplace eps (twice (count db))
}
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A program importing a library, and a cache folder of its own."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("FUZZPY_CACHE_DIR", str(folder))
    monkeypatch.delenv("FUZZPY_NO_CACHE", raising=False)
    (tmp_path / "lib.fz").write_text(LIB)
    main = tmp_path / "prog.fz"
    main.write_text(PROG)
    return main


def _json(report) -> dict:
    """The JSON report but its statistics of work done (time taken, LP solves run: a hit runs none,
    and an LP solved earlier in the same process is not solved again either)."""
    out = report_json(report)
    out.pop("timings_ms")
    out.pop("lp_solves")
    return out


def _check(path: Path, params=None, budget=None):
    before = dict(cache.STATS)
    report = R.check_with_budget(path, params or {}, "main", budget, use_cache=True)
    delta = {k: cache.STATS[k] - before[k] for k in before}
    return report, delta


def _rendered(report, capsys) -> tuple:
    from fuzzpy.render.sarif import sarif_log

    capsys.readouterr()
    report_text(report).write()
    text = capsys.readouterr()
    sarif = sarif_log([report])
    return text.out, text.err, _json(report), sarif


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("name,delta,budget", [("quickstart.fz", None, "0.1"), ("kmeans_gauss.fz", "1e-6", "1"),
                                               ("median.fz", "1e-9", None)])
def test_a_hit_prints_what_the_checker_prints(tmp_path, monkeypatch, capsys, name, delta, budget):
    """Text (stdout and stderr), JSON and SARIF of a hit equal those of a fresh check, for
    programs with an LP, Gaussian releases, a delta, and a budget they exceed."""

    monkeypatch.setenv("FUZZPY_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("FUZZPY_NO_CACHE", raising=False)
    path = EXAMPLES / name
    at, limit = (Fraction(delta) if delta else None), (Fraction(budget) if budget else None)
    fresh = R.check_with_budget(path, {}, "main", limit, at, use_cache=False)
    R.check_with_budget(path, {}, "main", limit, at, use_cache=True)
    hits = cache.STATS["hits"]
    cached = R.check_with_budget(path, {}, "main", limit, at, use_cache=True)
    assert cache.STATS["hits"] == hits + 1
    assert _rendered(cached, capsys) == _rendered(fresh, capsys)


def test_hit_gives_exactly_the_checkers_answer(project):
    fresh = R.check_with_budget(project, {}, "main", None, use_cache=False)
    first, d1 = _check(project)
    second, d2 = _check(project)
    assert d1["misses"] == 1 and d1["stored"] == 1
    assert d2["hits"] == 1 and d2["misses"] == 0
    assert second.ok and second.epsilon == 0.5 and second.mechanisms[0].sensitivity == 2
    assert _json(fresh) == _json(first) == _json(second)
    assert second.sources == fresh.sources and second.lp_solves == 0


@pytest.mark.parametrize("change", ["file", "import", "param", "version", "library", "entry"])
def test_every_input_of_the_answer_misses_the_cache(project, monkeypatch, change):
    _check(project)
    params, entry = {}, "main"
    if change == "file":
        project.write_text(PROG.replace("twice (count db)", "count db"))
    elif change == "import":
        (project.parent / "lib.fz").write_text(LIB.replace("2 * x", "3 * x"))
    elif change == "param":
        params = {"eps": "0.25"}
    elif change == "version":
        import fuzzpy

        monkeypatch.setattr(fuzzpy.version, "__version__", "99.0")
        cache.code_fingerprint.cache_clear()
    elif change == "library":
        monkeypatch.setattr(cache, "LIBRARIES", cache.LIBRARIES + ("json",))
        cache.environment_fingerprint.cache_clear()
    elif change == "entry":
        entry = None
    try:
        before = cache.STATS["misses"]
        report = cache.cached_check_file(project, params, entry)
        assert cache.STATS["misses"] == before + 1
    finally:
        cache.code_fingerprint.cache_clear()
        cache.environment_fingerprint.cache_clear()
    expected = {"file": (0.5, 1), "import": (0.5, 3), "param": (0.25, 2), "version": (0.5, 2), "library": (0.5, 2)}
    if change in expected:
        assert (report.epsilon, report.mechanisms[0].sensitivity) == expected[change]
    else:
        assert report.entry is None and report.ok


def test_a_new_file_that_changes_an_import_resolution_misses(project):
    """`import "lib.fz"` that was not found is an error; once the file exists the answer changes."""
    (project.parent / "lib.fz").unlink()
    refused, _ = _check(project)
    assert "E0105" in [d.code for d in refused.diagnostics]
    (project.parent / "lib.fz").write_text(LIB)
    accepted, delta = _check(project)
    assert delta["misses"] == 1 and accepted.ok


def _entries(project: Path) -> list[Path]:
    return [p for p in (project.parent / "cache" / "checks").glob("*.bin")]


def test_a_forged_entry_cannot_get_a_program_accepted(project):
    """Red team: another user (without this user's key) plants an entry that says an
    over-budget program is fine, at exactly the right name.  It is ignored: E0401."""
    greedy = PROG.replace("eps : num = 0.5", "eps : num = 5")
    project.write_text(greedy)
    refused, _ = _check(project)
    assert [d.code for d in refused.diagnostics] == ["E0401"]
    (entry,) = _entries(project)
    # The forger checks a harmless program with the same name and puts its report there,
    # authenticated with a key of their own.
    import hashlib
    import hmac
    import pickle

    payload = pickle.loads(entry.read_bytes()[len(cache.MAGIC) + 32:])
    harmless = R.check_with_budget(project, {}, "main", None, use_cache=False)
    harmless.inputs[0].epsilon = harmless.inputs[0].epsilon / 100
    body = pickle.dumps({**payload, "report": harmless})
    entry.write_bytes(cache.MAGIC + hmac.new(b"x" * 32, body, hashlib.sha256).digest() + body)
    again, delta = _check(project)
    assert delta["ignored"] == 1 and delta["hits"] == 0
    assert [d.code for d in again.diagnostics] == ["E0401"]
    assert "has epsilon 5" in again.diagnostics[0].message


@pytest.mark.parametrize("damage", [b"", b"garbage", None])
def test_a_damaged_entry_is_a_miss(project, damage):
    first, _ = _check(project)
    (entry,) = _entries(project)
    blob = entry.read_bytes()
    entry.write_bytes(blob[: len(blob) // 2] if damage is None else damage)
    again, delta = _check(project)
    assert delta["hits"] == 0 and delta["misses"] == 1
    assert _json(again) == _json(first)


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_a_folder_others_can_write_or_a_readable_key_is_not_used(project):
    _check(project)
    checks = project.parent / "cache" / "checks"
    checks.chmod(0o777)
    try:
        _, delta = _check(project)
        assert delta == {"hits": 0, "misses": 0, "stored": 0, "ignored": 0}  # not even looked at
    finally:
        checks.chmod(0o700)
    (checks / "key").chmod(0o644)
    _, delta = _check(project)
    assert delta == {"hits": 0, "misses": 0, "stored": 0, "ignored": 0}


def test_no_cache_and_the_off_switch(project, monkeypatch):
    R.check_with_budget(project, {}, "main", None, use_cache=False)
    assert not (project.parent / "cache" / "checks").exists()
    monkeypatch.setenv("FUZZPY_NO_CACHE", "1")
    _, delta = _check(project)
    assert delta == {"hits": 0, "misses": 0, "stored": 0, "ignored": 0}


@pytest.mark.parametrize("argv,plan", [
    (["check", "a.fz"], {"paths": [Path("a.fz")], "param": []}),
    (["check", "--budget", "1", "a.fz", "--param=eps=0.5", "--param", "k=2", "--no-cache", "--format=json"],
     {"paths": [Path("a.fz")], "param": ["eps=0.5", "k=2"], "budget": "1", "use_cache": False, "fmt": "json"}),
    (["check", "--", "--odd.fz"], {"paths": [Path("--odd.fz")], "param": []}),
    (["check"], None), (["check", "--help"], None), (["check", "a.fz", "--bogus"], None),
    (["check", "--budget", "-1", "a.fz"], None), (["check", "a.fz", "--budget"], None),
    (["check", "a.fz", "--server", "http://x"], None), (["run", "a.fz"], None), ([], None),
])
def test_fast_dispatch_takes_only_what_it_knows(argv, plan):
    assert checkcmd.fast_plan(argv) == plan


def test_the_fuzzpy_script_checks_without_typer_and_prints_the_same(project):
    """The console entry: a plain check loads neither typer nor pydantic, and prints what the
    full command line prints (json, then a cache hit)."""
    probe = ("import sys, runpy; sys.argv = ['fuzzpy', 'check', '--format', 'json', sys.argv[1]]\n"
             "import fuzzpy.interfaces.checkcmd as entry; entry.exit_process = sys.exit  # keep the process to look in it\n"
             "try:\n    runpy.run_module('fuzzpy', run_name='__main__')\n"
             "except SystemExit as e:\n    code = e.code\n"
             "print(sorted(m for m in ('typer', 'click', 'pydantic', 'pandas', 'pulp', 'highspy', 'numpy', 'mpmath', 'scipy', 'ctypes') if m in sys.modules),"
             " code, file=sys.stderr)\n")
    env = dict(os.environ)
    runs = [subprocess.run([sys.executable, "-c", probe, str(project)], capture_output=True, text=True, env=env,
                           timeout=120) for _ in range(2)]
    for run in runs:
        assert run.stderr.strip().splitlines()[-1] == "[] 0", run.stderr
    from typer.testing import CliRunner

    from fuzzpy.interfaces.cli import app

    full = CliRunner().invoke(app, ["check", "--format", "json", "--no-cache", str(project)])
    outs = [json.loads(r.stdout) for r in runs] + [json.loads(full.stdout)]
    for out in outs:
        out.pop("timings_ms"), out.pop("lp_solves")
    assert outs[0] == outs[1] == outs[2] and outs[0]["ok"] is True


def test_usage_errors_are_the_same_on_both_paths(project):
    code = checkcmd.guard(lambda: checkcmd.run_check([project], budget="lots"))
    assert code == 2
    from typer.testing import CliRunner

    from fuzzpy.interfaces.cli import app

    res = CliRunner().invoke(app, ["check", "--budget", "lots", str(project)])
    assert res.exit_code == 2 and "E0701" in res.stderr and "--budget expects a non-negative number" in res.stderr


def test_an_authentic_entry_under_another_name_is_a_miss(project):
    """An entry is this user's, but for another input (renamed into place): its recorded key
    material differs, so it is not used."""
    greedy = project.with_name("greedy.fz")
    greedy.write_text(PROG.replace("eps : num = 0.5", "eps : num = 5"))
    _check(project)
    (mine,) = _entries(project)
    refused, _ = _check(greedy)
    (other,) = [e for e in _entries(project) if e != mine]
    os.replace(mine, other)
    again, delta = _check(greedy)
    assert delta["hits"] == 0 and delta["misses"] == 1
    assert [d.code for d in again.diagnostics] == [d.code for d in refused.diagnostics] == ["E0401"]


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_private_folder_refuses_what_it_cannot_trust(tmp_path, monkeypatch):
    from fuzzpy.cachedir import private_folder

    monkeypatch.delenv("FUZZPY_NO_CACHE", raising=False)
    monkeypatch.setenv("FUZZPY_CACHE_DIR", str(tmp_path / "c"))
    assert private_folder("grammar") == tmp_path / "c" / "grammar"
    (tmp_path / "c").chmod(0o777)
    assert private_folder("grammar") is None  # a root others can write: not used at all
    (tmp_path / "c").chmod(0o755)
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("FUZZPY_CACHE_DIR", str(tmp_path / "file" / "below"))
    assert private_folder("grammar") is None
    monkeypatch.setenv("FUZZPY_NO_CACHE", "1")
    assert private_folder("grammar") is None


def test_without_a_usable_cache_folder_the_parser_is_built_each_time(tmp_path):
    """A read-only or unusable cache folder: nothing is written, and checking still works."""
    (tmp_path / "file").write_text("")
    env = dict(os.environ, FUZZPY_CACHE_DIR=str(tmp_path / "file" / "below"))
    prog = tmp_path / "p.fz"
    prog.write_text(PROG.replace('import "lib.fz"\n', "").replace("twice (count db)", "count db"))
    run = subprocess.run([sys.executable, "-m", "fuzzpy", "check", str(prog)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert run.returncode == 0 and f"{prog}: ok" in run.stdout, run.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "p.fz"]


def test_the_cache_folder_stays_bounded(project, monkeypatch):
    monkeypatch.setattr(cache, "MAX_ENTRIES", 4)
    for i in range(6):
        project.write_text(PROG.replace("0.5", f"0.{i + 1}"))
        _check(project)
    entries = _entries(project)
    assert 3 <= len(entries) <= 4
    newest, delta = _check(project)  # the last one written is still there
    assert delta["hits"] == 1 and newest.epsilon == Fraction(3, 5)
