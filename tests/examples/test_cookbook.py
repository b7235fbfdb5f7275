"""docs/cookbook.md: every recipe's command runs and prints exactly what the cookbook shows, and
the epsilon each recipe states is the one the run reports (so the cookbook cannot rot).

The commands run in this process through the command line's own entry point (much faster than
ten subprocesses, each of which would import and parse the standard library again).  If an
intended change alters the seeded outputs, regenerate the output blocks with
`python tests/examples/test_cookbook.py --update` and review the diff.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
COOKBOOK = ROOT / "docs" / "cookbook.md"
TOPICS = ["counts with filters", "grouped means", "quantiles", "a crosstab", "top-k", "regression",
          "adaptive clipping", "a cdf", "the sparse vector", "a decision tree", "privacy units",
          "a join with a public table", "a join of two private tables",
          "linear regression with no step size"]
BLOCK = re.compile(r"```bash\n(?P<cmd>[^`]*)```\n\n```text\n(?P<out>[^`]*)```")
runner = CliRunner()


def recipes() -> list[tuple[str, str, str, str]]:
    """(title, stated epsilon, command, shown output) for every `## N. title` section."""
    out = []
    for section in re.split(r"^## ", COOKBOOK.read_text(), flags=re.M)[1:]:
        title = section.splitlines()[0]
        if not re.match(r"\d+\. ", title):
            continue
        eps = re.search(r"\*\*Epsilon: ([0-9/.]+)\*\*", section)
        block = BLOCK.search(section)
        assert eps and block, title
        (cmd,) = [line.strip() for line in block["cmd"].splitlines() if line.strip().startswith("fuzzpy ")]
        out.append((title, eps.group(1), cmd, block["out"]))
    return out


def run(cmd: str, ledger: Path) -> str:
    from fuzzpy.interfaces.cli import app

    result = runner.invoke(app, shlex.split(cmd)[1:], env={"FUZZPY_LEDGER": str(ledger)})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_the_cookbook_has_the_fourteen_recipes():
    titles = [t.split(". ", 1)[1].lower() for t, *_ in recipes()]
    assert len(titles) == 14
    for topic, title in zip(TOPICS, titles):
        assert topic in title, (topic, title)
    for _, _, cmd, _ in recipes():  # reproducible outputs: seeded, and from the shipped data
        assert " --seed " in cmd and ("examples/data/adult_sample.csv" in cmd
                                      or "examples/data/flights_sample.csv" in cmd)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    ledger = tmp_path_factory.mktemp("cookbook") / "ledger.sqlite"
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        return {cmd: run(cmd, ledger) for _, _, cmd, _ in recipes()}
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("title, eps, cmd, shown", recipes(), ids=lambda v: v if isinstance(v, str) and
                         re.match(r"\d+\. ", v) else "")
def test_recipe_prints_what_the_cookbook_shows(title, eps, cmd, shown, outputs):
    actual = outputs[cmd]
    assert actual == shown, ("docs/cookbook.md is out of date; if the change is intended, run "
                             "`python tests/examples/test_cookbook.py --update` and review the diff\n" + actual)
    first = actual.splitlines()[0]   # a zCDP program states its epsilon at the delta it is run with
    assert f"(main): epsilon {eps} of budget" in first or f"(main): epsilon {eps} at delta" in first


def update() -> None:
    """Replace every recipe's output block by its command's stdout."""
    os.chdir(ROOT)
    ledger = Path(tempfile.mkdtemp()) / "ledger.sqlite"

    def replace(m: re.Match) -> str:
        (cmd,) = [line.strip() for line in m["cmd"].splitlines() if line.strip().startswith("fuzzpy ")]
        return f"```bash\n{m['cmd']}```\n\n```text\n{run(cmd, ledger)}```"

    COOKBOOK.write_text(BLOCK.sub(replace, COOKBOOK.read_text()))


if __name__ == "__main__":
    if sys.argv[1:] == ["--update"]:
        update()
    else:
        print(__doc__)
