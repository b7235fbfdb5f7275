"""An import is read only when it is a `.fz` file, so that a data file's rows (private) never reach
a diagnostic: not through an import of the data file by its own name, a data file renamed or
symlinked as `.fz`, nor any message about the import."""

from __future__ import annotations

import os

from check_and_run import T

from fuzzpy.checking.program import check_source
from fuzzpy.diagnostics import render


def codes(report) -> set[str]:
    return {d.code for d in report.diagnostics}


def test_import_of_a_data_file_does_not_show_its_rows(tmp_path):
    """First review round: importing the data file itself shows none of its rows in any
    diagnostic or source the report keeps."""
    data = tmp_path / "adult.data"
    data.write_text("39, State-gov, 77516, SECRET_ALICE\nfunction 28, Private, 1234, SECRET_BOB\n")
    r = check_source(f'import "{data}";\n' + T + "function main (db : bag T) : fuzzy num { laplace 1 (count db) }",
                     str(tmp_path / "t.fz"))
    shown = " ".join(d.message + " ".join(d.notes) for d in r.diagnostics)
    shown += " ".join(r.sources.values())
    assert "SECRET" not in shown


def test_a_symlinked_import_does_not_quote_a_data_row(tmp_path):
    """Fourth review round, finding 2 (medium-low, all commands): a `.fz` symlink to a data file was
    parsed as a program, and the parse error quoted the data file's first row.

    syntax/loader.py refuses imports whose *name* does not end in `.fz` ("Never parse (and quote in
    errors) other files: a data file's rows are private"), but `resolve_import` then followed
    symlinks (`c.resolve()`), and the check was on the link's name, not the target's.  An
    analyst's project that ships `lib.fz -> /data/adult.data` (or any data file renamed .fz) made
    `fuzzpy check`, `fuzzpy run` (before the budget, without charging) and the editor print the
    first row of the private file: "unexpected an integer '39'" and the line `39, State-gov,
    SECRET_ALICE` under a caret, labelled with the resolved path, although no error message may
    depend on private data.  Suggested fix: check the extension of the resolved target too (and
    refuse symlinks that leave the importing project), or never quote source lines of an imported
    file that fails to parse."""
    secret = tmp_path / "adult.data"
    secret.write_text("39, State-gov, SECRET_ALICE\n28, Private, SECRET_BOB\n")
    os.symlink(secret, tmp_path / "lib.fz")
    r = check_source('import "lib.fz"\n' + T + "function main (db : bag T) : fuzzy num { laplace 1 (count db) }\n",
                     str(tmp_path / "prog.fz"))
    shown = "\n".join(render(d, r.sources) for d in r.diagnostics)
    assert "SECRET" not in shown


def test_an_import_of_a_data_file_by_its_own_name_is_refused_unread(tmp_path):
    """Fourth review round, finding 2, what is handled: a non-.fz import is E0105, unread."""
    (tmp_path / "adult.data").write_text("39, State-gov, SECRET_ALICE\n")
    r = check_source('import "adult.data"\n' + T + "function main (db : bag T) : fuzzy num { laplace 1 (count db) }\n",
                     str(tmp_path / "prog.fz"))
    assert codes(r) == {"E0105"}
    assert "SECRET" not in "\n".join(render(d, r.sources) for d in r.diagnostics)
