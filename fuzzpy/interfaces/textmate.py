"""The TextMate grammar of fuzzpy (editors/textmate/fuzzpy.tmLanguage.json), for syntax
highlighting in VS Code and other editors that read TextMate grammars.

Generated, so that it cannot drift from the language: the keywords are the literal words of the
lark grammar (fuzzpy/syntax/grammar.lark), the built-in functions the primitive registry's names
(mechanisms get a scope of their own).  `python -m fuzzpy.interfaces.docgen` writes it with the
generated docs, and `--check` (run by the tests) fails when it is stale.  The regular expressions
keep to the subset that Oniguruma (the editors' engine) and Python's `re` read alike.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..primitives.registry import all_primitives
from ..syntax.parser import GRAMMAR

PATH = Path(__file__).resolve().parents[2] / "editors" / "textmate" / "fuzzpy.tmLanguage.json"
SCOPE = "source.fuzzpy"
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# The scope of each kind of keyword; a word the lark grammar gains later and that is not listed
# here is still highlighted, as `keyword.other.fuzzpy`.
KEYWORD_SCOPES = {
    "keyword.declaration.fuzzpy": ("function", "public", "schema", "param", "import"),
    "keyword.control.fuzzpy": ("let", "sample", "if", "then", "else", "fun", "return", "case", "of"),
    "keyword.other.constructor.fuzzpy": ("inl", "inr"),
    "keyword.other.policy.fuzzpy": ("drop", "default"),
    "keyword.other.key.fuzzpy": ("unique", "at", "most", "per", "value"),
    "storage.type.fuzzpy": ("num", "int", "bool", "string", "unit", "vec", "cat", "bag", "fuzzy", "list", "seq",
                            "parts"),
    "constant.language.fuzzpy": ("true", "false", "inf"),
}


def grammar_keywords() -> list[str]:
    """Every word the lark grammar spells out (`"let"`, `"bag"`, ...), `_` included."""
    return sorted({w for w in re.findall(r'"([^"\s]+)"', GRAMMAR.read_text(encoding="utf-8"))
                   if _IDENT.fullmatch(w)})


def _words(words: list[str]) -> str:
    return r"\b(?:" + "|".join(sorted(words, key=lambda w: (-len(w), w))) + r")\b"


def grammar() -> dict:
    keywords = [w for w in grammar_keywords() if w != "_"]
    listed = {w for ws in KEYWORD_SCOPES.values() for w in ws}
    groups = {scope: [w for w in ws if w in keywords] for scope, ws in KEYWORD_SCOPES.items()}
    groups["keyword.other.fuzzpy"] = [w for w in keywords if w not in listed]
    prims = all_primitives()
    mechanisms = sorted(n for n, p in prims.items() if p.is_mechanism and _IDENT.fullmatch(n))
    builtins = sorted(n for n, p in prims.items() if not p.is_mechanism and _IDENT.fullmatch(n))
    ident = r"[A-Za-z_][A-Za-z0-9_]*"
    repository = {
        "comment": {"patterns": [
            {"name": "comment.line.number-sign.pragma.fuzzpy",
             "match": r"^\s*#\s*(fuzzpy:)\s*(budget|delta)\b.*$",
             "captures": {"1": {"name": "keyword.other.pragma.fuzzpy"}, "2": {"name": "keyword.other.pragma.fuzzpy"}}},
            {"name": "comment.line.number-sign.fuzzpy", "match": r"#.*$"},
        ]},
        "string": {"name": "string.quoted.double.fuzzpy", "begin": '"', "end": r'"|$',
                   "patterns": [{"name": "constant.character.escape.fuzzpy", "match": r"\\."}]},
        "declaration": {"patterns": [
            {"match": rf"\b(function)\s+({ident})",
             "captures": {"1": {"name": "keyword.declaration.fuzzpy"}, "2": {"name": "entity.name.function.fuzzpy"}}},
            {"match": rf"\b(schema)\s+({ident})",
             "captures": {"1": {"name": "keyword.declaration.fuzzpy"}, "2": {"name": "entity.name.type.fuzzpy"}}},
            {"match": rf"\b(param)\s+({ident})",
             "captures": {"1": {"name": "keyword.declaration.fuzzpy"},
                          "2": {"name": "variable.other.constant.fuzzpy"}}},
        ]},
        "keyword": {"patterns": [{"name": scope, "match": _words(words)} for scope, words in groups.items() if words]
                    + [{"name": "variable.language.wildcard.fuzzpy", "match": r"\b_\b"}]},
        "number": {"name": "constant.numeric.fuzzpy", "match": r"\b[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?\b"},
        "type-variable": {"name": "entity.name.type.parameter.fuzzpy", "match": r"'[a-z][A-Za-z0-9_]*"},
        "field": {"match": rf"(\.)\s*({ident}|[0-9]+)",
                  "captures": {"1": {"name": "punctuation.accessor.fuzzpy"},
                               "2": {"name": "variable.other.member.fuzzpy"}}},
        "builtin": {"patterns": [
            {"name": "support.function.mechanism.fuzzpy", "match": _words(mechanisms)},
            {"name": "support.function.builtin.fuzzpy", "match": _words(builtins)},
        ]},
        "operator": {"name": "keyword.operator.fuzzpy",
                     "match": r"-o(?![A-Za-z0-9_])|->|=>|::|==|!=|<=|>=|&&|\|\||[-+*/<>!=|]"},
    }
    order = ["comment", "string", "declaration", "field", "keyword", "number", "type-variable", "builtin", "operator"]
    return {
        "$schema": "https://raw.githubusercontent.com/martinring/tmlanguage/master/tmlanguage.json",
        "name": "fuzzpy",
        "scopeName": SCOPE,
        "fileTypes": ["fz"],
        "comment": "Generated by `python -m fuzzpy.interfaces.docgen` from fuzzpy/syntax/grammar.lark and the "
                   "primitive registry; do not edit.",
        "patterns": [{"include": f"#{name}"} for name in order],
        "repository": repository,
    }


def grammar_json() -> str:
    return json.dumps(grammar(), indent=2) + "\n"
