"""The TextMate grammar (editors/textmate/fuzzpy.tmLanguage.json): valid JSON, generated from the
lark grammar and the registry (not stale), every regex compiles, and tokenising every example and
standard-library file with a small TextMate scope matcher gives the scopes that fuzzpy's own lexer
(lark, on the same text) says each token has."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fuzzpy.interfaces.textmate import PATH, grammar_json, grammar_keywords
from fuzzpy.primitives.registry import all_primitives
from fuzzpy.syntax.parser import _lark

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "examples").glob("*.fz")) + sorted((ROOT / "stdlib").glob("*.fz"))
WORD_SCOPES = ("keyword.", "storage.type.", "constant.language.", "variable.language.")


@pytest.fixture(scope="module")
def tm() -> dict:
    return json.loads(PATH.read_text(encoding="utf-8"))


def regexes(node) -> list[str]:
    if isinstance(node, dict):
        out = [node[k] for k in ("match", "begin", "end") if k in node]
        return out + [r for v in node.values() for r in regexes(v)]
    if isinstance(node, list):
        return [r for v in node for r in regexes(v)]
    return []


def test_grammar_file_is_the_generated_one_and_its_regexes_compile(tm: dict):
    assert PATH.read_text(encoding="utf-8") == grammar_json(), "run python -m fuzzpy.interfaces.docgen"
    assert tm["scopeName"] == "source.fuzzpy" and tm["fileTypes"] == ["fz"]
    found = regexes(tm)
    assert len(found) >= 15
    for r in found:
        re.compile(r)
        # outside the subset Oniguruma and Python read alike: Python-only named groups and anchors
        assert "(?P" not in r and r"\Z" not in r and r"\A" not in r, r


# ---- a small TextMate tokeniser (match, begin/end, captures, includes) ------------------------------


class Tokeniser:
    def __init__(self, tm: dict) -> None:
        self.repo = tm["repository"]
        self.top = self.flatten(tm["patterns"])

    def flatten(self, patterns: list[dict]) -> list[dict]:
        out = []
        for p in patterns:
            if "include" in p:
                out += self.flatten([self.repo[p["include"][1:]]])
            elif "patterns" in p and "match" not in p and "begin" not in p:
                out += self.flatten(p["patterns"])
            else:
                out.append(p)
        return out

    def scopes(self, text: str) -> list[list[str]]:
        """The innermost scope name of every character of every line ("" where none)."""
        out, open_rule = [], None
        for line in text.split("\n"):
            marks, pos = [""] * (len(line) + 1), 0
            while pos <= len(line):
                rules = self.top if open_rule is None else self.flatten(open_rule.get("patterns", []))
                best = None
                if open_rule is not None:
                    m = re.compile(open_rule["end"]).search(line, pos)
                    if m:
                        best = (m.start(), -1, m, None)
                for i, rule in enumerate(rules):
                    m = re.compile(rule.get("match") or rule["begin"]).search(line, pos)
                    if m and (best is None or m.start() < best[0]):
                        best = (m.start(), i, m, rule)
                if best is None:
                    if open_rule is not None:
                        marks[pos:] = [open_rule["name"]] * (len(marks) - pos)
                    break
                start, _, m, rule = best
                if open_rule is not None:
                    marks[pos:start] = [open_rule["name"]] * (start - pos)
                if rule is None:  # the open rule ends
                    marks[m.start():m.end()] = [open_rule["name"]] * (m.end() - m.start())
                    open_rule = None
                elif "begin" in rule:
                    marks[m.start():m.end()] = [rule["name"]] * (m.end() - m.start())
                    open_rule = rule
                else:
                    self.mark(marks, m, rule)
                pos = m.end() if m.end() > pos else pos + 1
            out.append(marks)
        return out

    @staticmethod
    def mark(marks: list[str], m: re.Match, rule: dict) -> None:
        if "name" in rule:
            marks[m.start():m.end()] = [rule["name"]] * (m.end() - m.start())
        for group, cap in rule.get("captures", {}).items():
            if m.group(int(group)) is not None:
                a, b = m.span(int(group))
                marks[a:b] = [cap["name"]] * (b - a)


def keyword_terminals() -> set[str]:
    """The lark terminals that are words spelled in the grammar (`"let"` -> LET)."""
    return {t.name for t in _lark().terminals
            if t.pattern.type == "str" and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", t.pattern.value)}


def test_every_keyword_of_the_lark_grammar_is_highlighted(tm: dict):
    words = grammar_keywords()
    assert {"let", "sample", "bag", "fuzzy", "drop", "default", "inf", "_"} <= set(words)
    tok = Tokeniser(tm)
    for w in words:
        marks = tok.scopes(f"{w} ")[0]
        assert marks[0].startswith(WORD_SCOPES), (w, marks[0])
    for name in all_primitives():
        scope = tok.scopes(f"{name} ")[0][0]
        assert scope.startswith(WORD_SCOPES + ("support.function.",)), (name, scope)
        if all_primitives()[name].is_mechanism:
            assert scope == "support.function.mechanism.fuzzpy", name
    # words that merely contain keywords are names
    for name in ("letter", "sampled", "bags", "default_age", "inflow", "_x"):
        assert tok.scopes(f"{name} ")[0][0] == "", name


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_tokenising_the_examples_agrees_with_the_lexer(tm: dict, path: Path):
    text = path.read_text(encoding="utf-8")
    marks = Tokeniser(tm).scopes(text)
    kw, prims = keyword_terminals(), all_primitives()
    lines = text.split("\n")
    seen = set()
    for t in _lark().lex(text, dont_ignore=True):
        scope = marks[t.line - 1][t.column - 1]
        before = lines[t.line - 1][: t.column - 1].rstrip()
        where = f"{path.name}:{t.line}:{t.column} {t.type} {str(t)[:20]!r} -> {scope!r}"
        if t.type == "COMMENT":
            assert scope.startswith("comment.line.number-sign"), where
        elif t.type == "STRING":
            assert scope == "string.quoted.double.fuzzpy", where
            end = t.column - 1 + len(t) - 1  # the closing quote is in the string too
            assert marks[t.line - 1][end] == scope, where
        elif t.type in ("NUMBER", "INT"):
            expected = "variable.other.member.fuzzpy" if before.endswith(".") else "constant.numeric.fuzzpy"
            assert scope == expected, where
        elif t.type in kw:
            assert scope.startswith(WORD_SCOPES), where
        elif t.type == "NAME":
            assert not scope.startswith(WORD_SCOPES), where
            if before.endswith("."):
                assert scope == "variable.other.member.fuzzpy", where
            elif re.search(r"\bfunction$", before):
                assert scope == "entity.name.function.fuzzpy", where
            elif str(t) in prims:
                assert scope.startswith("support.function."), where
        elif t.type == "TYVAR":
            assert scope == "entity.name.type.parameter.fuzzpy", where
        seen.add(t.type)
    assert {"COMMENT", "NAME"} <= seen
