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
