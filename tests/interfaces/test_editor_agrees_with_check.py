"""The editor (the language server's incremental checker) reports what `fuzzpy check` reports for
the same text, whatever the layout of the file, whether the entry point is local or imported, on
odd documents, with odd server options; and a folder that `fuzzpy check` walks treats a library
as the editor does."""

from __future__ import annotations

from fractions import Fraction as F
from pathlib import Path

import pytest
from cli_runs import fz
from cpu_limited import finishes

from fuzzpy.checking.program import check_source

ROOT = Path(__file__).resolve().parents[2]
T = 'schema T { x : num[0, 1] }\n'
MAIN = "function main (db : bag T) : fuzzy num "
GOOD = T + "function main (db : bag T) : fuzzy num { laplace 1 (count db) }\n"

_EXECUTOR: list = []


def codes(report) -> set[str]:
    return {d.code for d in report.diagnostics}


def lsp_analysis(text: str, path: Path, **options):
    """What the language server computes for a document (the report it publishes and lenses)."""
    from fuzzpy.interfaces.lsp import IncrementalChecker, Settings, make_executor

    if not _EXECUTOR:
        _EXECUTOR.append(make_executor())
    settings = Settings.from_options(options) if options else Settings()
    return _EXECUTOR[0].submit(IncrementalChecker().analyse, text, str(path), settings).result(timeout=60)


def cli_full(report) -> set[str]:
    """The diagnostics `fuzzpy check` reports for the same text (budget rules applied)."""
    from fuzzpy.pipeline import budget as R

    R.apply_budget(report, None)
    return codes(report)


# ---- the entry point, whatever the layout ---------------------------------------------------------

LSP_ENTRY_NOT_A_UNIT = {
    "indented-main-releases-a-count": T + "  function main (db : bag T) : fuzzy num { return (count db) }\n",
    "indented-main-over-its-budget": "# fuzzpy: budget 0.5\n" + T
                                     + " function main (db : bag T) : fuzzy num { laplace 1 (count db) }\n",
    "main-on-a-params-line-over-budget": "# fuzzpy: budget 0.5\n" + T
                                         + "param e : num = 1; function main (db : bag T) : fuzzy num "
                                           "{ laplace e (count db) }\n",
    "main-sharing-a-line-with-a-function": "# fuzzpy: budget 0.5\n" + T
                                           + "function f (x : num) : num { x } function main (db : bag T) : "
                                             "fuzzy num { laplace 1 (f (count db)) }\n",
}


@pytest.mark.parametrize("name", sorted(LSP_ENTRY_NOT_A_UNIT))
def test_the_editor_reports_what_fuzzpy_check_reports_whatever_the_layout(name, tmp_path):
    """Fourth review round, finding 1 (medium, language server): an entry point that does not start
    its own declaration chunk was checked as a library function, so the editor showed no E0302 /
    E0401 and no epsilon.

    `IncrementalChecker._plan` (lsp/incremental.py) decided `entry_mode = settings.entry in units`,
    and a *unit* is a chunk holding exactly one function; chunks start only at `^(function|schema|
    param|import)` in column 0 (syntax/parser.py _DECL_START).  So `main` indented by one space (its
    chunk is the schema's), or declared on the same line as a param, was not a unit: the file was
    treated as a library, checked with the synthetic entry, and `report.entry` was None.  The editor
    then published no "main is not differentially private" (E0302) for `return (count db)`, no
    E0401 for a `# fuzzpy: budget` it exceeds, and the code lens read "epsilon: not proven (0
    errors)", while `fuzzpy check` on the same text reported the error.  docs/editor.md and
    README.md promise the editor reports the same diagnostics as `fuzzpy check`.  Suggested fix:
    decide entry mode from the parsed modules (any FunDecl named the entry in the own module), and
    when the entry is not a unit run the full check *with the real entry*; also let _DECL_START
    accept leading whitespace so indented declarations get their own chunks."""
    text = LSP_ENTRY_NOT_A_UNIT[name]
    path = tmp_path / "p.fz"
    cli = cli_full(check_source(text, str(path)))
    assert cli & {"E0302", "E0401"}  # the CLI refuses it
    editor = lsp_analysis(text, path)
    assert codes(editor.report) == cli
    assert editor.report.entry == "main"


def test_the_editor_matches_the_cli_when_main_starts_its_own_line(tmp_path):
    """Fourth review round, finding 1, the control: the same programs laid out one declaration per
    line: editor and CLI agree (E0302, E0401, lens)."""
    from fuzzpy.interfaces.lsp.hover import epsilon_summary

    path = tmp_path / "p.fz"
    leak = T + "function main (db : bag T) : fuzzy num { return (count db) }\n"
    over = "# fuzzpy: budget 0.5\n" + T + "function main (db : bag T) : fuzzy num { laplace 1 (count db) }\n"
    assert codes(lsp_analysis(leak, path).report) == cli_full(check_source(leak, str(path))) == {"E0302"}
    editor = lsp_analysis(over, path).report
    assert codes(editor) == cli_full(check_source(over, str(path))) == {"E0401"}
    assert epsilon_summary(editor) == "epsilon = 1 (db 1), over budget 0.5"


def test_the_editor_checks_an_imported_entry_point_like_the_cli(tmp_path):
    """Sixth review round, finding 1 (medium: the editor showed a refused program as clean): an
    entry point that comes from an imported file was checked by `fuzzpy check` but not by the
    language server.

    lsp/incremental.py `_plan` set entry_mode only when `settings.entry` is a unit of this file or
    a FunDecl in this file's own module.  `check_source` (and so `fuzzpy check` / `fuzzpy run`)
    looks the entry up among all functions, imports included, so a file `import "lib.fz"` whose lib
    defines `main (db) = return (count db)` was refused by the CLI with E0302, while the editor
    checked it as a library (synthetic entry) and published no diagnostic and no entry: a green
    editor for a program that releases a raw count.  (The fourth round's fix covered layouts of a
    local `main`; this is the imported case.)  Suggested fix: decide entry_mode from all parsed
    modules, i.e. exactly the lookup check_source does, and then run the full check path."""
    (tmp_path / "lib.fz").write_text(T + MAIN + "{ return (count db) }\n")
    path = tmp_path / "p.fz"
    text = 'import "lib.fz"\nfunction helper (x : num) : num { x }\n'
    path.write_text(text)
    cli = check_source(text, str(path))
    assert not cli.ok and codes(cli) == {"E0302"}  # pins the CLI side (true today)
    editor = lsp_analysis(text, path)
    assert codes(editor.report) == codes(cli)


def test_the_cli_refuses_an_imported_leaking_entry_point(tmp_path):
    """Sixth review round, finding 1: the half that held: the CLI does check an imported main."""
    (tmp_path / "lib.fz").write_text(T + MAIN + "{ return (count db) }\n")
    text = 'import "lib.fz"\n'
    r = check_source(text, str(tmp_path / "p.fz"))
    assert not r.ok and "E0302" in codes(r) and r.entry == "main"


# ---- odd documents and options ---------------------------------------------------------------------

LSP_ODD = {
    "empty": ("", set()),
    "whitespace": ("  \n\n ", set()),
    "nul-byte": (GOOD + "\x00", {"E0101"}),
    "deep-nesting": (T + "function main (db : bag T) : fuzzy num { laplace 1 (" + "(" * 2000 + "count db" + ")" * 2000
                     + ") }\n", set()),
    "import-of-a-csv": ('import "../examples/data/adult_sample.csv"\n' + GOOD, {"E0105"}),
    "bad-pragma": ("# fuzzpy: budget 1/0\n" + GOOD, {"E0103"}),
    "library-without-main": (T + "function f (db : bag T) : num { count db }\n", set()),
}


@pytest.mark.parametrize("name", sorted(LSP_ODD))
def test_the_language_server_on_odd_documents(name):
    """Fourth review round, handled: no exception, the CLI's codes, no data read."""
    text, expected = LSP_ODD[name]
    analysis = lsp_analysis(text, ROOT / "tests" / "odd.fz")
    assert codes(analysis.report) == expected


def test_one_bad_server_option_keeps_the_budget():
    """Fourth review round, finding 6 (low): numbers typed into the language server's options
    bypassed the bounded reader fuzzpy/exact.py, and one bad server option discarded the others.

    `Settings.from_options` (lsp/analysis.py) read the budget with Fraction(str(...)):
    "1e99999999" computed 10^99999999 inside the server's `initialize` handler (the event loop),
    which then did not answer for minutes; a negative budget was accepted (the CLI refuses both,
    E0701).  An invalid `debounceMs` raised ValueError out of from_options, so on_initialize fell
    back to the default Settings and silently dropped a valid `budget` given next to it: the editor
    stopped reporting E0401.  (`fuzzpy audit --epsilon` had the same reader: tests/audit/test_cli.py.)
    Suggested fix: read with fuzzpy.exact.parse_exact (refusing negatives), and parse each server
    option on its own, ignoring (and logging) only the invalid one."""
    from fuzzpy.interfaces.lsp.analysis import Settings

    s = Settings.from_options({"budget": "0.5", "debounceMs": "fast"})
    assert s.budget == F(1, 2)


def test_an_absurd_budget_option_does_not_hang_the_server():
    """Fourth review round, finding 6: "1e99999999" as the server's budget option."""
    code = ("from fuzzpy.interfaces.lsp.analysis import Settings; "
            "print(Settings.from_options({'budget': '1e99999999'}).budget)")
    res = finishes(["-c", code])
    assert res is not None and res.stdout.strip() == "None"


# ---- libraries in a checked folder --------------------------------------------------------------------

ROW = 'schema Row { x : num[0, 100], y : num[0, 100], k : cat{"a", "b", "c", "d"}, flag : bool }\n'


def test_checking_a_folder_with_a_library_passes_like_the_editor(tmp_path):
    """Fourth review round, finding 9 (low, CI): `fuzzpy check FOLDER` failed on library files that
    the editor accepts.

    docs/editor.md: "Files without a main function are treated as libraries: they are checked,
    but 'missing entry point' (E0207) is not reported for them" (editor); README.md and
    docs/editor.md tell CI to run `fuzzpy check analyses/ --budget 1.0`, which searches folders
    recursively.  A folder that holds a helper library (as stdlib/ does) failed CI with E0207,
    exit 1, although every file is fine in the editor.  Suggested fix: when checking a folder,
    treat files without the entry point as libraries (as the language server does)."""
    library = (ROOT / "stdlib" / "bags.fz").read_text()
    (tmp_path / "bags.fz").write_text(library)
    (tmp_path / "prog.fz").write_text(ROW + 'import "bags.fz"\n'
                                      "function main (db : bag Row) : fuzzy num { laplace 1 (count_where (fun r -> r.flag) db) }\n")
    assert codes(lsp_analysis(library, tmp_path / "bags.fz").report) == set()
    res = fz("check", tmp_path, "--budget", "1.0", catch=True)
    assert res.exit_code == 0, res.stderr
