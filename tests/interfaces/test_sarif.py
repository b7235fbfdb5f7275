"""SARIF 2.1.0 output, validated with jsonschema.

No package on PyPI ships the official OASIS schema file (checked: sarif-om, sarif-pydantic,
pysarif, sarif-tools), and the OASIS site is not reachable from CI here, so
`sarif-schema-2.1.0-subset.json` is a hand-written subset of the 2.1.0 schema: the objects and
properties fuzzpy emits, with the standard's required fields, enumerations and minimums, and
unknown properties rejected (as the official schema does)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from fuzzpy.diagnostics import CODES
from fuzzpy.interfaces.cli import app
from fuzzpy.pipeline.budget import check_with_budget
from fuzzpy.render.sarif import BOUND_RULE, sarif_log

SCHEMA = json.loads((Path(__file__).with_name("sarif-schema-2.1.0-subset.json")).read_text())

GOOD = textwrap.dedent("""\
    schema Adult { age : num[17, 90] }

    function main (db : bag Adult) : fuzzy num {
      sample c = laplace 0.2 (count db);
      return c
    }
    """)

BAD = textwrap.dedent("""\
    schema Adult { age : num[17, 90] }

    function helper (db : bag Adult) : num {
      count db +
    }

    function main (db : bag Adult) : fuzzy num {
      sample c = laplace 0.1 (cuont db);
      return c
    }
    """)

OVER = "# fuzzpy: budget 0.1\n" + GOOD


def validate(log: dict) -> None:
    jsonschema.Draft7Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(log)


@pytest.fixture
def programs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "good.fz").write_text(GOOD)
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "bad.fz").write_text(BAD)
    (tmp_path / "dir" / "over.fz").write_text(OVER)
    return tmp_path


def results_for(log: dict, uri: str) -> list[dict]:
    return [r for r in log["runs"][0]["results"]
            if r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == uri]


def test_log_is_valid_and_describes_every_code(programs: Path):
    reports = [check_with_budget(Path(p), {}, "main", None) for p in ("good.fz", "dir/bad.fz", "dir/over.fz")]
    log = sarif_log(reports)
    validate(log)
    assert log["version"] == "2.1.0" and len(log["runs"]) == 1
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert driver["name"] == "fuzzpy"
    assert [r["id"] for r in driver["rules"]] == list(CODES) + [BOUND_RULE]
    assert all(r["shortDescription"]["text"] == CODES[r["id"]] for r in driver["rules"][:-1])
    for result in run["results"]:  # every ruleIndex points at its rule
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == programs.resolve().as_uri() + "/"


def test_errors_have_codes_levels_messages_and_regions(programs: Path):
    log = sarif_log([check_with_budget(Path("dir/bad.fz"), {}, "main", None)])
    validate(log)
    results = results_for(log, "dir/bad.fz")
    assert [r["ruleId"] for r in results] == ["E0101", "E0201"]
    assert {r["level"] for r in results} == {"error"}
    syntax, unknown = results
    assert syntax["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 5, "startColumn": 1, "endLine": 5, "endColumn": 2}
    assert unknown["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 8, "startColumn": 27, "endLine": 8, "endColumn": 32}
    assert unknown["message"]["text"].splitlines()[:2] == ["unknown name 'cuont'",
                                                          "note: did you mean count or union?"]
    assert unknown["locations"][0]["physicalLocation"]["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
    assert not [r for r in log["runs"][0]["results"] if r["ruleId"] == BOUND_RULE]  # no bound was proven


def test_each_checked_program_gets_a_note_with_its_epsilon(programs: Path):
    log = sarif_log([check_with_budget(Path(p), {}, "main", None) for p in ("good.fz", "dir/over.fz")])
    validate(log)
    (good,) = results_for(log, "good.fz")
    assert good["ruleId"] == BOUND_RULE and good["level"] == "note" and good["kind"] == "informational"
    assert good["message"]["text"] == "main: epsilon = 0.2 (db 0.2), delta = 0"
    assert good["properties"]["epsilonExact"] == "1/5"
    assert good["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 3, "startColumn": 10, "endLine": 3, "endColumn": 14}
    over = results_for(log, "dir/over.fz")
    assert [(r["ruleId"], r["level"]) for r in over] == [("E0401", "error"), (BOUND_RULE, "note")]
    assert over[1]["message"]["text"] == "main: epsilon = 0.2 (db 0.2), delta = 0; budget 0.1"


def test_cli_sarif_for_files_and_folders(programs: Path):
    result = CliRunner().invoke(app, ["check", "good.fz", "dir", "--format", "sarif", "--budget", "1"])
    assert result.exit_code == 3  # the worst file decides: dir/over.fz is over budget (3), dir/bad.fz wrong (1)
    log = json.loads(result.stdout)
    validate(log)
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in log["runs"][0]["results"]}
    assert uris == {"good.fz", "dir/bad.fz", "dir/over.fz"}


def test_files_outside_the_working_directory_get_absolute_uris(programs: Path, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "far.fz"
    elsewhere.write_text(GOOD)
    log = sarif_log([check_with_budget(elsewhere, {}, "main", None)])
    validate(log)
    location = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": elsewhere.resolve().as_uri()}


def test_the_schema_rejects_what_sarif_forbids(programs: Path):
    log = sarif_log([check_with_budget(Path("dir/bad.fz"), {}, "main", None)])
    log["runs"][0]["results"][0]["level"] = "fatal"
    with pytest.raises(jsonschema.ValidationError):
        validate(log)
    log = sarif_log([check_with_budget(Path("dir/bad.fz"), {}, "main", None)])
    log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    with pytest.raises(jsonschema.ValidationError):
        validate(log)


def test_the_readme_ci_recipe_passes_on_the_projects_examples(tmp_path):
    """Issue 38: the README's CI recipe, run exactly as written on examples/ (in place of the
    user's analyses/), exits 0 with a valid SARIF log that reports no error."""
    import re
    import shlex
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    [line] = re.findall(r"^- run: (fuzzpy check analyses/ .*) > fuzzpy\.sarif$", (root / "README.md").read_text(), re.M)
    argv = shlex.split(line.replace("analyses/", "examples/"))
    out = subprocess.run([sys.executable, "-m", "fuzzpy", *argv[1:]], cwd=root, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    log = json.loads(out.stdout)
    jsonschema.validate(log, SCHEMA)
    results = log["runs"][0]["results"]
    assert not [r for r in results if r["level"] == "error"]
    bounds = {Path(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]).name: r["properties"]
              for r in results if r["ruleId"] == BOUND_RULE}
    for gaussian in ("kmeans_gauss.fz", "logistic_regression_gauss.fz"):  # stated at the recipe's delta, in budget
        assert bounds[gaussian]["deltaExact"] == "1/1000000" and bounds[gaussian]["epsilon"] <= 2, bounds[gaussian]
