"""Parsed standard-library files kept on disk (syntax/library_cache.py): a tree read back is the
parser's tree for that text, and anything else (another text, an entry not written with the
user's key, the cache turned off, a file outside the standard library) parses afresh."""

from __future__ import annotations

import pytest

from fuzzpy.stdlib_location import STDLIB
from fuzzpy.syntax import library_cache as L
from fuzzpy.syntax import parser

STDLIB_FILES = sorted(STDLIB.rglob("*.fz"))


def _fresh(text: str, file: str):
    parser.parse_chunk.cache_clear()
    parser._PARSED_TEXTS.clear()
    return parser.parse_module(text, file)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("FUZZPY_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "parses"


@pytest.mark.parametrize("path", STDLIB_FILES, ids=lambda p: p.name)
def test_a_kept_standard_library_tree_is_the_parsers_tree(path, cache_dir):
    text, file = path.read_text(), str(path)
    first, diags = L.parse_module_cached(text, file)
    assert not diags and len(list(cache_dir.glob("*.bin"))) == 1
    read_back, diags = L.parse_module_cached(text, file)
    assert not diags and read_back is not first  # from disk, not from memory
    assert repr(read_back) == repr(first) == repr(_fresh(text, file)[0])


def test_another_text_of_the_same_file_is_parsed_again(cache_dir):
    path = STDLIB_FILES[0]
    L.parse_module_cached(path.read_text(), str(path))
    edited = path.read_text() + "\nfunction added_by_the_test x { x }\n"
    module, _ = L.parse_module_cached(edited, str(path))
    assert any(getattr(d, "name", None) == "added_by_the_test" for d in module.decls)


def test_an_entry_not_written_with_the_users_key_is_ignored(cache_dir):
    path = STDLIB_FILES[0]
    text = path.read_text()
    L.parse_module_cached(text, str(path))
    (entry,) = cache_dir.glob("*.bin")
    blob = bytearray(entry.read_bytes())
    blob[-1] ^= 1  # the body changed after it was authenticated
    entry.write_bytes(bytes(blob))
    folder, key = L._place()
    assert L._load(folder, key, L._material(text, str(path))) is None
    module, _ = L.parse_module_cached(text, str(path))
    assert repr(module) == repr(_fresh(text, str(path))[0])


def test_files_outside_the_standard_library_and_a_cache_turned_off_are_not_kept(cache_dir, tmp_path, monkeypatch):
    own = tmp_path / "own.fz"
    own.write_text("function f x { x }\n")
    L.parse_module_cached(own.read_text(), str(own))
    assert not list(cache_dir.glob("*.bin"))
    monkeypatch.setenv("FUZZPY_NO_CACHE", "1")
    path = STDLIB_FILES[0]
    L.parse_module_cached(path.read_text(), str(path))
    assert not list(cache_dir.glob("*.bin"))
