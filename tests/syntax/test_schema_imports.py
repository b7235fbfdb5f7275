"""A schema declared once in a shared .fz file and imported by programs (examples/schemas/adult.fz):
resolved next to the importing file, refused with E0105 when missing and E0106 when cyclic."""

from __future__ import annotations

from pathlib import Path

from fuzzpy.checking.program import check_file

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = 'schema Person { age : num[0, 120], city : cat{"Paris", "Lyon"} }\n'
MAIN = ('function main (db : bag Person) : fuzzy num {\n'
        '  laplace 1 (count (filter (fun r -> r.city == "Lyon") db))\n}\n')


def _codes(report):
    return [(d.code, d.message) for d in report.diagnostics]


def test_schema_imported_from_a_sibling_and_from_a_subfolder(tmp_path):
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "person.fz").write_text(SCHEMA)
    (tmp_path / "people.fz").write_text(SCHEMA)
    (tmp_path / "a.fz").write_text('import "shared/person.fz"\n' + MAIN)
    (tmp_path / "b.fz").write_text('import "people.fz"\n' + MAIN)
    for name in ("a.fz", "b.fz"):
        r = check_file(tmp_path / name)
        assert r.ok and r.epsilon == 1, _codes(r)
        assert [c.name for c in r.schemas["Person"].columns] == ["age", "city"]


def test_an_import_is_relative_to_the_importing_file_not_the_working_directory(tmp_path, monkeypatch):
    # lib/schemas.fz imports "person.fz" next to itself (lib/), whatever folder the user runs in
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "person.fz").write_text(SCHEMA)
    (lib / "schemas.fz").write_text('import "person.fz"\n')
    (tmp_path / "p.fz").write_text('import "lib/schemas.fz"\n' + MAIN)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "person.fz").write_text('schema Person { age : num[0, 1] }\n')  # must not be picked
    monkeypatch.chdir(elsewhere)
    r = check_file(tmp_path / "p.fz")
    assert r.ok, _codes(r)
    assert [c.name for c in r.schemas["Person"].columns] == ["age", "city"]


def test_a_missing_schema_file_is_refused(tmp_path):
    (tmp_path / "p.fz").write_text('import "schemas/nowhere.fz"\n' + MAIN)
    r = check_file(tmp_path / "p.fz")
    assert not r.ok
    (d,) = [d for d in r.diagnostics if d.code == "E0105"]
    assert 'cannot find the library file "schemas/nowhere.fz"' in d.message
    assert d.span is not None and d.span.line == 1


def test_a_cycle_of_imports_is_refused(tmp_path):
    (tmp_path / "x.fz").write_text('import "y.fz"\n' + SCHEMA)
    (tmp_path / "y.fz").write_text('import "x.fz"\n')
    (tmp_path / "p.fz").write_text('import "x.fz"\n' + MAIN)
    r = check_file(tmp_path / "p.fz")
    assert any(d.code == "E0106" and "import cycle" in d.message for d in r.diagnostics), _codes(r)


def test_only_fuzzpy_files_are_imported(tmp_path):
    (tmp_path / "person.csv").write_text("age,city\n33,Paris\n")
    (tmp_path / "p.fz").write_text('import "person.csv"\n' + MAIN)
    r = check_file(tmp_path / "p.fz")
    (d,) = [d for d in r.diagnostics if d.code == "E0105"]
    assert "only fuzzpy files (.fz)" in d.message and "33" not in d.message


def test_the_examples_share_one_adult_schema():
    shared = check_file(ROOT / "examples" / "decision_tree.fz").schemas["Adult"]
    for name in ("histogram", "svt", "median", "cdf", "logistic_regression", "logistic_regression_gauss"):
        text = (ROOT / "examples" / f"{name}.fz").read_text()
        assert 'import "schemas/adult.fz"' in text and "schema Adult {" not in text, name
        assert check_file(ROOT / "examples" / f"{name}.fz").schemas["Adult"] == shared
