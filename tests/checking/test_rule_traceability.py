"""Every typing rule of docs/soundness.md is traceable both ways.

From the document to the code: each rule (a bold heading `**Name.**`) has one row in the table
"Where each rule is in the code", every symbol that row names exists, and each of them carries the
tag `rule Name` (in a comment at the definition or in its docstring).  From the code to the
document: every `rule Name` written under fuzzpy/ names a rule the document has.

The table's code cells are read as follows.  A backticked `path/to/file.py` is a file, relative
to fuzzpy/; `path/module.name` a definition in fuzzpy/path/module.py; `module.name` without a
folder a definition in fuzzpy/checking/module.py (else fuzzpy/module.py); a bare `name` (or
`Class.member`) a definition in the module named before it in the same cell.  Backticked names in
parentheses after a file are the definitions in that file that carry the tag (the file as a whole
otherwise); after a definition they are details of it (a parameter, a constant, a field, an
attribute), which its code must use: a name in a comment or docstring does not count.  Definitions are functions, classes, methods, assignments, and the
primitives a file declares (`@primitive("range", ...)`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "soundness.md"
CODE = ROOT / "fuzzpy"
TABLE_TITLE = "## Where each rule is in the code"

# Files that other work is rewriting while these tags are written: the code the table names there
# is not tagged yet.  Whoever merges that work tags it, then removes the file from here.
PENDING_TAGS: set[str] = set()

HEADING = re.compile(r"^\*\*([^*\n]+?)\.?\*\*", re.M)
TAG = re.compile(r"\b[Rr]ule(?:[ \t]*\n[ \t]*#)?\s+(?=[A-Z][a-z])")  # a name may be on the next line
TOKEN = re.compile(r"`([^`]+)`|\(|\)")


# ---- the document --------------------------------------------------------------------------------

@lru_cache(maxsize=None)
def doc_text() -> str:
    return DOC.read_text(encoding="utf-8")


def rule_names(text: str) -> list[str]:
    """The rules of the document, in order: its paragraphs that open with a bold name."""
    body = text.split(TABLE_TITLE)[0]
    return [m.group(1).strip() for m in HEADING.finditer(body)]


def table_rows(text: str) -> list[tuple[str, str]]:
    """(rule, code cell) for each row of the table."""
    lines = text.split(TABLE_TITLE, 1)[1].splitlines()
    rows = [line for line in lines if line.startswith("|")][2:]  # after the header and its rule
    out = []
    for line in rows:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == 2, f"a table row needs two cells: {line}"
        out.append((cells[0], cells[1]))
    return out


# ---- the table's references ----------------------------------------------------------------------

@dataclass
class Ref:
    """A file (`name` None) or a definition in it, named by the table for `rule`."""

    rule: str
    text: str                       # as the table writes it
    file: Path | None
    name: str | None = None         # a qualified name in the file: `f`, `Class.method`
    details: list[str] = field(default_factory=list)
    itemised: bool = False          # a file whose definitions are named in parentheses

    @property
    def relative(self) -> str:
        return self.file.relative_to(CODE).as_posix() if self.file is not None else "?"


def module_file(module: str) -> Path | None:
    """The file of a module as the table names it (`checker`, `primitives/arith`)."""
    candidates = [CODE / f"{module}.py"] if "/" in module else \
        [CODE / "checking" / f"{module}.py", CODE / f"{module}.py"]
    return next((p for p in candidates if p.is_file()), None)


def parse_cell(rule: str, cell: str) -> list[Ref]:
    """The files and definitions a code cell names, each with its details."""
    refs: list[Ref] = []
    depth = 0
    owner: Ref | None = None        # the last reference outside parentheses
    module: Path | None = None      # the module a bare name continues
    for m in TOKEN.finditer(cell):
        if m.group(1) is None:  # a parenthesis
            depth += 1 if m.group(0) == "(" else -1
            continue
        token = m.group(1).strip()
        if depth > 0:
            assert owner is not None, f"{rule}: `{token}` in parentheses follows nothing"
            if owner.name is None:  # a definition in the file just named
                owner.itemised = True
                refs.append(Ref(rule, f"{owner.text} ({token})", owner.file, token))
            else:
                owner.details.append(token)
            continue
        owner = _top_level(rule, token, module)
        module = owner.file
        refs.append(owner)
    return refs


def _top_level(rule: str, token: str, module: Path | None) -> Ref:
    if token.endswith(".py"):
        return Ref(rule, token, CODE / token if (CODE / token).is_file() else None)
    folder, _, rest = token.rpartition("/")
    head, dot, name = rest.partition(".")
    path = module_file(f"{folder}/{head}" if folder else head) if dot else None
    if path is not None:
        return Ref(rule, token, path, name)
    if folder:  # a folder was given, so the module must exist
        return Ref(rule, token, None, rest)
    return Ref(rule, token, module, token)  # a bare name: the module named before it


def table_refs() -> list[Ref]:
    return [ref for rule, cell in table_rows(doc_text()) for ref in parse_cell(rule, cell)]


# ---- the code ------------------------------------------------------------------------------------

@lru_cache(maxsize=None)
def source(path: Path) -> tuple[list[str], ast.Module]:
    text = path.read_text(encoding="utf-8")
    return text.splitlines(), ast.parse(text)


def _defines(node: ast.AST, name: str) -> bool:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name or any(_declares_primitive(d, name) for d in node.decorator_list)
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
    if isinstance(node, ast.AnnAssign):
        return isinstance(node.target, ast.Name) and node.target.id == name
    return False


def _declares_primitive(decorator: ast.expr, name: str) -> bool:
    """`@primitive("name", ...)`: the function is that primitive's typing rule."""
    return (isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) == "primitive"
            and bool(decorator.args) and isinstance(decorator.args[0], ast.Constant)
            and decorator.args[0].value == name)


def _member(body: list[ast.stmt], name: str, where: str) -> ast.AST:
    """The one definition of `name` in a body: at its own level, else in one of its classes."""
    own = [n for n in body if _defines(n, name)]
    if own:
        return own[-1]  # a later definition replaces an earlier one
    nested = [n for c in body if isinstance(c, ast.ClassDef) for n in c.body if _defines(n, name)]
    functions = [n for n in nested if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    nested = functions or nested  # a method over a field of the same name in another class
    if len(nested) != 1:
        raise LookupError(f"{where} has {len(nested) or 'no'} definitions of {name}")
    return nested[0]


def definition(ref: Ref) -> ast.AST:
    lines, tree = source(ref.file)
    node: ast.AST = tree
    for part in ref.name.split("."):
        if not isinstance(node, (ast.Module, ast.ClassDef)):
            raise LookupError(f"{ref.relative}: {part} is looked up inside something that is not a class")
        node = _member(node.body, part, ref.relative)
    return node


def identifiers(node: ast.AST) -> set[str]:
    """The names a definition's code uses or binds: variables, attributes, parameters, keywords,
    definitions (not its comments or docstrings)."""
    out: set[str] = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, ast.keyword) and n.arg is not None:
            out.add(n.arg)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
    return out


def region(ref: Ref) -> str:
    """The source a tag of the reference may be in: the whole file, or the definition with its
    decorators and the comment lines right above it."""
    lines, _ = source(ref.file)
    if ref.name is None:
        return "\n".join(lines)
    node = definition(ref)
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) - 1
    while start > 0 and lines[start - 1].lstrip().startswith("#"):
        start -= 1
    return "\n".join(lines[start:node.end_lineno])


def tags(text: str, names: list[str]) -> list[tuple[str | None, str]]:
    """(rule, what follows `rule`) for every tag in the text; rule None when it names no rule.
    The longest name that matches wins (`Widen (breadth)` over `Widen`); a name may continue on
    the next comment line."""
    out = []
    by_length = sorted(names, key=len, reverse=True)
    for m in TAG.finditer(text):
        rest = re.sub(r"\s*\n\s*#?\s*", " ", text[m.end():m.end() + 120])
        hit = next((n for n in by_length if rest.startswith(n) and not rest[len(n):len(n) + 1].isalnum()), None)
        out.append((hit, rest.split("\n")[0][:60]))
    return out


def code_files() -> list[Path]:
    return sorted(CODE.rglob("*.py"))


def pending(ref: Ref) -> bool:
    return ref.file is not None and ref.relative in PENDING_TAGS


# ---- the tests -----------------------------------------------------------------------------------

def test_the_document_has_its_rules_and_the_table_one_row_per_rule():
    names = rule_names(doc_text())
    assert len(names) >= 30 and len(set(names)) == len(names), names
    rows = [rule for rule, _ in table_rows(doc_text())]
    assert len(set(rows)) == len(rows), f"rules with two rows: {sorted({r for r in rows if rows.count(r) > 1})}"
    assert set(rows) == set(names), (f"rules without a row: {sorted(set(names) - set(rows))}; "
                                     f"rows that are no rule: {sorted(set(rows) - set(names))}")


def test_every_symbol_the_table_names_exists():
    missing = []
    for ref in table_refs():
        if ref.file is None:
            missing.append(f"{ref.rule}: `{ref.text}` names no file or module")
            continue
        if ref.name is None:
            continue
        try:
            used = identifiers(definition(ref))
        except LookupError as exc:
            missing.append(f"{ref.rule}: `{ref.text}`: {exc}")
            continue
        for detail in ref.details:
            if detail.rpartition(".")[2] not in used:  # `ir.WHOLE_VALUES`: the name after the module
                missing.append(f"{ref.rule}: `{ref.text}` does not use `{detail}`")
    assert not missing, "\n".join(missing)


def test_every_rule_is_tagged_somewhere_in_the_code():
    names = rule_names(doc_text())
    found = {name for path in code_files() for name, _ in tags(path.read_text(encoding="utf-8"), names)}
    refs = table_refs()
    waiting = {rule for rule in names
               if all(pending(r) for r in refs if r.rule == rule) and any(r.rule == rule for r in refs)}
    assert not set(names) - found - waiting, f"rules never tagged: {sorted(set(names) - found - waiting)}"


def test_every_symbol_the_table_names_carries_its_rule():
    names = rule_names(doc_text())
    untagged = []
    for ref in table_refs():
        if ref.file is None or ref.itemised or pending(ref):
            continue
        if ref.rule not in {name for name, _ in tags(region(ref), names)}:
            untagged.append(f"{ref.rule}: {ref.relative} {ref.name or ''}")
    assert not untagged, "no `rule Name` tag at:\n" + "\n".join(untagged)


def test_every_tag_in_the_code_names_a_rule_of_the_document():
    names = rule_names(doc_text())
    unknown = []
    for path in code_files():
        for name, rest in tags(path.read_text(encoding="utf-8"), names):
            if name is None:
                unknown.append(f"{path.relative_to(CODE)}: rule {rest}")
    assert not unknown, "tags that name no rule of docs/soundness.md:\n" + "\n".join(unknown)


def test_files_waiting_for_their_tags_are_named_by_the_table_and_still_untagged():
    names = rule_names(doc_text())
    for path in sorted(PENDING_TAGS):
        refs = [r for r in table_refs() if r.file is not None and r.relative == path and not r.itemised]
        assert refs, f"{path} is waiting for tags, but the table names nothing in it"
        assert any(r.rule not in {n for n, _ in tags(region(r), names)} for r in refs), \
            f"every symbol the table names in {path} is tagged: remove it from PENDING_TAGS"
