"""Documentation is generated from, and tested against, the code it describes."""

import re
import subprocess
import sys

from conftest import ROOT, check


def test_generated_docs_are_up_to_date():
    r = subprocess.run([sys.executable, "-m", "fuzzpy.interfaces.docgen", "--check"], capture_output=True, text=True,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr


def test_every_primitive_has_docs_and_a_justification():
    from fuzzpy.primitives.registry import all_primitives
    from fuzzpy.runtime import kernels  # noqa: F401 - registers the evaluators (`p.run`)

    for p in all_primitives().values():
        assert p.doc.strip() and p.justification.strip() and p.signature.strip(), p.name
        assert p.run is not None or p.is_mechanism or p.category in ("partition", "bag", "ordered"), p.name


def test_readme_starts_with_the_two_commands_and_ci_runs_the_second():
    text = (ROOT / "README.md").read_text()
    run_cmd = re.search(r"<!-- run-command -->\n```bash\n(.+)\n```", text).group(1)
    test_cmd = re.search(r"<!-- test-command -->\n```bash\n(.+)\n```", text).group(1)
    assert run_cmd.startswith("pip install") and "fuzzpy run examples/" in run_cmd
    assert test_cmd.startswith("pip install") and "pytest" in test_cmd
    assert "test-command" in (ROOT / ".ci" / "run").read_text()


def _fuzzpy_blocks(path):
    return re.findall(r"```fuzzpy\n(.*?)```", path.read_text(), re.S)


def test_code_in_the_readme_and_language_reference_checks():
    blocks = _fuzzpy_blocks(ROOT / "README.md") + _fuzzpy_blocks(ROOT / "docs" / "language.md")
    assert blocks
    for block in blocks:
        source = block if "function main" in block else block + "\nschema Z__ { z : num }\n" \
            "function main (db : bag Z__) : fuzzy num { laplace 1 (count db) }\n"
        r = check(source)
        assert r.ok, (block[:200], [f"{d.code} {d.message}" for d in r.diagnostics])


# ---- statements about the checker and the command line, held against what they describe ----------

ONE_COLUMN = 'schema T { x : num[0, 1] }\n'


def test_stdlib_doc_describes_how_closures_are_charged():
    """Fourth review round, finding 7 (low, docs): docs/stdlib.md said a closure capturing private
    data passed to a user-defined function "is charged infinity by the checker today"; the checker
    charges such a closure exactly."""
    from fuzzpy.checking.program import check_source

    r = check_source(ONE_COLUMN + "function app g (y : num) { g y }\n"
                     "function main (db : bag T) : fuzzy num { laplace 1 (app (fun (u : num) -> count db) 0) }\n", "t.fz")
    assert r.ok and r.epsilon == 1  # finite, exact
    assert "charged infinity by the checker today" not in " ".join((ROOT / "docs" / "stdlib.md").read_text().split())


def test_examples_readme_knows_exp_is_a_primitive():
    """Fourth review round, finding 7: examples/README.md said logistic_regression computes the
    sigmoid by squarings because "the language has no `exp`"; `exp` is a primitive."""
    from fuzzpy.primitives.registry import all_primitives

    assert "exp" in all_primitives()
    assert "the language has no `exp`" not in " ".join((ROOT / "examples" / "README.md").read_text().split())


def test_the_readme_check_output_is_what_fuzzpy_check_prints(monkeypatch):
    """Fourth review round (the documentation against the code), handled."""
    from typer.testing import CliRunner

    from fuzzpy.interfaces.cli import app

    text = (ROOT / "README.md").read_text()
    block = re.search(r"```text\n\$ fuzzpy check examples/quickstart.fz\n(.*?)```", text, re.S).group(1)
    monkeypatch.chdir(ROOT)
    res = CliRunner().invoke(app, ["check", "examples/quickstart.fz"])
    assert res.exit_code == 0 and res.stdout == block


def test_the_readmes_fast_subset_uses_the_declared_slow_marker():
    """Issue 38: the README gives the whole suite's time and a fast subset's command; the subset
    leaves out the marker pyproject declares, which tests use."""
    text = (ROOT / "README.md").read_text()
    [marker] = re.findall(r'^python -m pytest -q -n 2 -m "not (\w+)"$', text, re.M)
    assert f'markers = ["{marker}:' in (ROOT / "pyproject.toml").read_text()
    assert f"the tests marked `{marker}`" in " ".join(text.split())
    assert any(f"pytest.mark.{marker}" in p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
