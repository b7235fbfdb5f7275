"""Parse fuzzpy source straight into the AST (lark LALR with a transformer, cached grammar).

Files are split into declaration chunks (a line starting with `function`, `schema`, `param` or
`import` starts a new one) and each chunk is parsed on its own: a syntax error is reported and
parsing resumes at the next declaration, so one file yields all its independent errors, and the
language server can re-parse only the chunks an edit touched (`parse_chunk` is memoised).
"""

from __future__ import annotations

import dataclasses
import gc
import re
import sys
import threading
from fractions import Fraction
from functools import lru_cache
from pathlib import Path

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from ..diagnostics import Diagnostic, FuzzError, Span
from ..hints import parse_hints
from . import ast as A

GRAMMAR = Path(__file__).with_name("grammar.lark")
MAX_SOURCE_BYTES = 5_000_000
MAX_LITERAL_DIGITS = 400
_DECL_START = re.compile(r"^(function|schema|public\s+schema|param|import)\b", re.M)


_PARSE_LOCK = threading.Lock()


@lru_cache(maxsize=None)
def _lark() -> Lark:
    """The one parser.  Its LALR tables are cached on disk (building them takes about 0.5 s), in
    the user's private cache folder only: lark's default place is a file of predictable name in
    the shared temporary folder, which another user could plant, and lark reads it with pickle.
    Without a private folder (read-only home, FUZZPY_NO_CACHE) the tables are built each time."""
    from ..cachedir import private_folder

    folder = private_folder("grammar")
    tables = f"fuzzpy-{sys.version_info[0]}.{sys.version_info[1]}.lark"
    cache: bool | str = False if folder is None else str(folder / tables)
    return Lark(GRAMMAR.read_text(), parser="lalr", lexer="contextual", propagate_positions=False,
                transformer=_BUILDER, cache=cache, maybe_placeholders=False, keep_all_tokens=True)


_new = object.__new__


def _span(file: str, line: int, col: int, end_line: int, end_col: int) -> Span:
    """Span(file, line, col, end_line, end_col), built without the frozen dataclass's __init__
    (five object.__setattr__ calls, 3 times slower): the parser makes one per token and per node.
    The instance is the same: the same fields in the same order, no other state."""
    s = _new(Span)
    d = s.__dict__
    d["file"] = file
    d["line"] = line
    d["col"] = col
    d["end_line"] = end_line
    d["end_col"] = end_col
    return s


def _tok_span(file: str, tok: Token) -> Span:
    return _span(file, tok.line, tok.column, tok.end_line or tok.line, tok.end_column or tok.column + 1)


def _number(tok: Token, file: str) -> Fraction:
    text = str(tok)
    if len(text) > MAX_LITERAL_DIGITS:
        raise FuzzError(Diagnostic("E0103", f"numeric literal too long ({len(text)} characters)",
                                   _tok_span(file, tok)))
    mantissa, _, exp = text.lower().partition("e")
    if exp and abs(int(exp)) > 308:
        raise FuzzError(Diagnostic("E0103", f"numeric literal {text} is out of range", _tok_span(file, tok)))
    if text.isascii() and text.isdigit():  # the common case: a whole number, without the string parse
        return Fraction(int(text))
    return Fraction(text)


def _unescape(tok: Token) -> str:
    body = str(tok)[1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


class _Builder(Transformer):
    """Builds AST nodes bottom-up during parsing; callbacks are named after grammar aliases."""

    def __init__(self) -> None:
        super().__init__(visit_tokens=False)
        self.file = "<input>"  # set before each parse, under _PARSE_LOCK

    # ---- declarations
    def start(self, sp, decls):
        return list(decls)

    def import_decl(self, sp, c):
        return A.Import(sp, _unescape(c[0]))

    def param_decl(self, sp, c):
        return A.ParamDecl(sp, str(c[0]), c[1], c[2] if len(c) > 2 else None,
                           name_span=_tok_span(self.file, c[0]))

    def schema_decl(self, sp, c):
        unit = c[1] if len(c) > 1 and isinstance(c[1], tuple) else None
        columns = list(c[2:] if unit else c[1:])
        if unit is None:
            return A.SchemaDecl(sp, str(c[0]), columns, name_span=_tok_span(self.file, c[0]))
        return A.UnitSchemaDecl(sp, str(c[0]), columns, name_span=_tok_span(self.file, c[0]), unit=str(unit[1]),
                                unit_span=_tok_span(self.file, unit[1]))

    def schema_unit(self, sp, c):
        return ("unit", c[0])

    def public_schema_decl(self, sp, c):
        return A.PublicSchemaDecl(sp, str(c[0]), list(c[1:]), name_span=_tok_span(self.file, c[0]))

    def column(self, sp, c):
        policy, default = ("drop", None)
        key = next((x for x in c[2:] if x[0] == "key"), None)
        for x in c[2:]:
            if x[0] != "key":
                policy, default = x
        if key is not None:
            return A.KeyedColumnDecl(sp, str(c[0]), c[1], policy, default, key[1], key[2])
        return A.ColumnDecl(sp, str(c[0]), c[1], policy, default)

    def key_unique(self, sp, c):
        return ("key", Fraction(1), sp)

    def key_at_most(self, sp, c):
        return ("key", _number(c[0], self.file), sp)

    def policy_drop(self, sp, c):
        return ("drop", None)

    def policy_default(self, sp, c):
        return ("default", c[0])

    def fun_decl(self, sp, c):
        name, rest = c[0], list(c[1:])
        body = rest.pop()
        ret = rest.pop() if rest and isinstance(rest[-1], tuple) and rest[-1][0] == "ret" else None
        return A.FunDecl(sp, str(name), rest, ret[1] if ret else None, body,
                         name_span=_tok_span(self.file, name))

    def ret_type(self, sp, c):
        return ("ret", c[0])

    def typed_param(self, sp, c):
        sens = c[1] if len(c) == 3 else None
        return A.Param(sp, str(c[0]), c[-1], sens)

    def untyped_param(self, sp, c):
        return A.Param(sp, str(c[0]), None, None)

    def sens_ann(self, sp, c):
        return c[0]

    def sens(self, sp, c):
        return _number(c[0], self.file)

    def sens_inf(self, sp, c):
        return float("inf")

    # ---- types
    def num_type(self, sp, c):
        lo, hi = c[0] if c else (None, None)
        return A.TNum(sp, lo, hi, False, bool(c))

    def int_type(self, sp, c):
        lo, hi = c[0] if c else (None, None)
        return A.TNum(sp, lo, hi, True, bool(c))

    def bounds(self, sp, c):
        return (c[0], c[1])

    def signed(self, sp, c):
        return _number(c[0], self.file)

    def neg_number(self, sp, c):
        return -_number(c[0], self.file)

    def pos_inf(self, sp, c):
        return None

    def neg_inf(self, sp, c):
        return None

    def bool_type(self, sp, c):
        return A.TSimple(sp, "bool")

    def string_type(self, sp, c):
        return A.TSimple(sp, "string")

    def unit_type(self, sp, c):
        return A.TSimple(sp, "unit")

    def vec_type(self, sp, c):
        return A.TVec(sp, _number(c[0], self.file))

    def cat_type(self, sp, c):
        return A.TCat(sp, [_unescape(t) for t in c])

    def record_type(self, sp, c):
        return A.TRecord(sp, list(c))

    def field_type(self, sp, c):
        return (str(c[0]), c[1])

    def atom_type(self, sp, c):
        return c[0]

    def tensor_type(self, sp, c):
        return A.TProduct(sp, "tensor", list(c))

    def with_type(self, sp, c):
        return A.TProduct(sp, "with", list(c))

    def sum_type(self, sp, c):
        return A.TSum(sp, c[0], c[1])

    def bag_type(self, sp, c):
        return A.TWrap(sp, "bag", c[0])

    def fuzzy_type(self, sp, c):
        return A.TWrap(sp, "fuzzy", c[0])

    def list_type(self, sp, c):
        return A.TWrap(sp, "list", c[0])

    def seq_type(self, sp, c):
        return A.TWrap(sp, "seq", c[0])

    def parts_type(self, sp, c):
        return A.TParts(sp, [_unescape(t) for t in c[:-1]], c[-1])

    def fun_lin(self, sp, c):
        return A.TFun(sp, c[0], Fraction(1), c[1])

    def fun_sens(self, sp, c):
        return A.TFun(sp, c[0], c[1], c[2])

    def fun_inf(self, sp, c):
        return A.TFun(sp, c[0], float("inf"), c[1])

    def named_type(self, sp, c):
        return A.TName(sp, str(c[0]))

    def tyvar(self, sp, c):
        return A.TVarExpr(sp, str(c[0])[1:])

    # ---- patterns
    def pat_var(self, sp, c):
        return A.PVar(sp, str(c[0]))

    def pat_wild(self, sp, c):
        return A.PWild(sp)

    def pat_tensor(self, sp, c):
        return A.PProduct(sp, "tensor", list(c))

    def pat_with(self, sp, c):
        return A.PProduct(sp, "with", list(c))

    # ---- expressions
    def let_expr(self, sp, c):
        return A.Let(sp, c[0], c[1], c[2])

    def sample_expr(self, sp, c):
        return A.Sample(sp, c[0], c[1], c[2])

    def if_expr(self, sp, c):
        return A.If(sp, c[0], c[1], c[2])

    def lambda_expr(self, sp, c):
        return A.Lambda(sp, list(c[:-1]), c[-1])

    def return_expr(self, sp, c):
        return A.Return(sp, c[0])

    def case_expr(self, sp, c):
        return A.Case(sp, c[0], list(c[1:]))

    def arm_inl(self, sp, c):
        return A.CaseArm(sp, "inl", [c[0]], c[1])

    def arm_inr(self, sp, c):
        return A.CaseArm(sp, "inr", [c[0]], c[1])

    def arm_nil(self, sp, c):
        return A.CaseArm(sp, "nil", [], c[0])

    def arm_cons(self, sp, c):
        return A.CaseArm(sp, "cons", [c[0], c[1]], c[2])

    def _bin(op):  # noqa: N805 - helper building a callback
        def build(self, sp, c):
            return A.BinOp(sp, op, c[0], c[1])
        return build

    or_op, and_op = _bin("||"), _bin("&&")
    add_op, sub_op, mul_op, div_op = _bin("+"), _bin("-"), _bin("*"), _bin("/")

    def cmp_op(self, sp, c):
        return A.BinOp(sp, str(c[1]), c[0], c[2])

    def not_op(self, sp, c):
        return A.UnOp(sp, "!", c[0])

    def neg_op(self, sp, c):
        return A.UnOp(sp, "-", c[0])

    def cons_op(self, sp, c):
        return A.Cons(sp, c[0], c[1])

    def apply(self, sp, c):
        return A.Apply(sp, c[0], c[1])

    def inl_expr(self, sp, c):
        return A.Inject(sp, "inl", c[0])

    def inr_expr(self, sp, c):
        return A.Inject(sp, "inr", c[0])

    def field_access(self, sp, c):
        return A.Field(sp, c[0], str(c[1]), name_span=_tok_span(self.file, c[1]))

    def projection(self, sp, c):
        return A.Proj(sp, c[0], int(str(c[1])))

    def number(self, sp, c):
        text = str(c[0])
        value = _number(c[0], self.file)
        return A.Lit(sp, value, integer=not any(ch in text for ch in ".eE"))

    def neg_number_lit(self, sp, c):
        text = str(c[0])
        return A.Lit(sp, -_number(c[0], self.file), integer=not any(ch in text for ch in ".eE"))

    def string(self, sp, c):
        return A.Lit(sp, _unescape(c[0]))

    def true(self, sp, c):
        return A.Lit(sp, True)

    def false(self, sp, c):
        return A.Lit(sp, False)

    def unit(self, sp, c):
        return A.Lit(sp, None)

    def var(self, sp, c):
        return A.Var(sp, str(c[0]))

    def paren(self, sp, c):
        return c[0]

    def ascribe(self, sp, c):
        return A.Ascribe(sp, c[0], c[1])

    def tensor(self, sp, c):
        return A.Tuple(sp, "tensor", list(c))

    def with_pair(self, sp, c):
        return A.Tuple(sp, "with", list(c))

    def list_lit(self, sp, c):
        return A.ListLit(sp, list(c))

    def record(self, sp, c):
        return A.RecordLit(sp, list(c))

    def field_init(self, sp, c):
        return (str(c[0]), c[1])


# lark's in-parser transformer cannot receive positions (meta), so the parser keeps all tokens and
# each callback computes its span from its first and last child, then drops keyword tokens.
_KEPT_TOKENS = {"NAME", "NUMBER", "STRING", "INT", "CMP_OP", "TYVAR"}


def _edge_start(items) -> tuple[int, int] | None:
    """(line, col) where the first child (a token, a node, or inside a list or tuple) starts."""
    for item in items:
        if isinstance(item, Token):
            return item.line, item.column
        span = getattr(item, "span", None)
        if span is not None:
            return span.line, span.col
        if isinstance(item, (list, tuple)) and item:
            found = _edge_start(item)
            if found is not None:
                return found
    return None


def _edge_end(items) -> tuple[int, int] | None:
    """(end_line, end_col) where the last child ends (as its span would say)."""
    for item in reversed(items):
        if isinstance(item, Token):
            return item.end_line or item.line, item.end_column or item.column + 1
        span = getattr(item, "span", None)
        if span is not None:
            return span.end_line, span.end_col
        if isinstance(item, (list, tuple)) and item:
            found = _edge_end(item)
            if found is not None:
                return found
    return None


def _with_span(fn):
    def callback(self, children):
        file = self.file
        first = _edge_start(children)
        if first is None:
            span = Span.point(file, 1, 1)
        else:
            last = _edge_end(children)
            span = _span(file, first[0], first[1], last[0], last[1])  # type: ignore[index]
        kept = [c for c in children if not (isinstance(c, Token) and c.type not in _KEPT_TOKENS)]
        return fn(self, span, kept)
    return callback


for _name, _fn in list(vars(_Builder).items()):
    if callable(_fn) and not _name.startswith("_"):
        setattr(_Builder, _name, _with_span(_fn))

_BUILDER = _Builder()


def split_chunks(source: str) -> list[tuple[int, str]]:
    """Split a file at declaration starts; returns (first line number, text) pairs."""
    starts = [m.start() for m in _DECL_START.finditer(source)]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    chunks = []
    line = 1
    for i, begin in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(source)
        text = source[begin:end]
        chunks.append((line, text))
        line += text.count("\n")  # counted chunk by chunk: linear in the file
    return chunks


@lru_cache(maxsize=4096)
def parse_chunk(file: str, first_line: int, text: str) -> tuple[tuple[A.Decl, ...], tuple[Diagnostic, ...]]:
    """Parse one declaration chunk; positions are made file-absolute by padding with newlines.
    The same text parsed at another line is not parsed again: its tree is copied with every
    span moved (a line inserted above a function must not re-parse every later chunk)."""
    moved = _moved_parse(file, first_line, text)
    if moved is not None:
        return moved, ()
    padded = "\n" * (first_line - 1) + text
    try:
        with _PARSE_LOCK:
            _BUILDER.file = file
            decls = _lark().parse(padded)
        _remember_parse(file, first_line, text, tuple(decls))
        return tuple(decls), ()
    except FuzzError as e:
        return (), tuple(e.diagnostics)
    except VisitError as e:
        if isinstance(e.orig_exc, FuzzError):
            return (), tuple(e.orig_exc.diagnostics)
        raise
    except UnexpectedInput as e:
        return (), (_syntax_diagnostic(file, e, padded),)
    except RecursionError:
        span = Span.point(file, first_line, 1)
        return (), (Diagnostic("E0107", "expression nested too deeply to parse", span),)


# (file, text) -> (first line, decls) of chunks that parsed and whose every span lies inside the
# chunk's own lines.  Padding with newlines moves every position lark sees by whole lines and
# leaves columns alone, so the tree of the same text at another line is this one with every span's
# lines moved by the difference.  A tree holding a span outside its lines (the builder's
# `Span.point(file, 1, 1)` for a rule with no children) is not remembered, since that span would
# not move: those chunks are parsed again.
_PARSED_TEXTS: dict[tuple[str, str], tuple[int, tuple[A.Decl, ...]]] = {}
_PARSED_TEXTS_MAX = 4096


def _moved_parse(file: str, first_line: int, text: str) -> tuple[A.Decl, ...] | None:
    found = _PARSED_TEXTS.get((file, text))
    if found is None:
        return None
    line, decls = found
    return tuple(_moved(d, first_line - line) for d in decls)


def _remember_parse(file: str, first_line: int, text: str, decls: tuple[A.Decl, ...]) -> None:
    if first_line <= 1 or not _spans_within(decls, first_line, first_line + text.count("\n")):
        return
    if len(_PARSED_TEXTS) >= _PARSED_TEXTS_MAX:
        _PARSED_TEXTS.clear()
    _PARSED_TEXTS[(file, text)] = (first_line, decls)


def _spans_within(value: object, first: int, last: int) -> bool:
    todo = [value]  # a loop on exact types, not recursion: it walks every tree a file parses into
    while todo:
        item = todo.pop()
        kind = type(item)
        if kind in _LEAVES:
            continue
        if kind is Span or isinstance(item, Span):
            if not first <= item.line <= item.end_line <= last:  # type: ignore[attr-defined]
                return False
        elif kind is list or kind is tuple or isinstance(item, (list, tuple)):
            todo.extend(item)  # type: ignore[arg-type]
        elif isinstance(item, A.Node):
            todo.extend(vars(item).values())
    return True


_FIELDS: dict[type, tuple[str, ...]] = {}  # per node class: its dataclass fields


def _fields_of(cls: type) -> tuple[str, ...]:
    fields = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return fields


_LEAVES = frozenset({str, int, bool, float, Fraction, type(None)})  # immutable, and hold no span


def _moved(value: object, lines: int) -> object:
    """A copy of a parsed value (nodes, lists, tuples) with every span `lines` lines further down;
    the leaves (names, numbers) are immutable and shared.  Leaves are tested before the call
    (most fields are names and numbers): a moved file copies tens of thousands of values."""
    kind = type(value)
    if kind in _LEAVES:
        return value
    if kind is Span:
        return _moved_span(value, lines)  # type: ignore[arg-type]
    if isinstance(value, A.Node):  # its declared fields only: whatever a later stage kept on the node stays there
        attrs = vars(value)
        copy = _new(kind)
        fields = {}
        for name in _FIELDS.get(kind) or _fields_of(kind):
            if name in attrs:
                v = attrs[name]
                field_kind = type(v)
                if field_kind in _LEAVES:
                    fields[name] = v
                elif field_kind is Span:
                    fields[name] = _moved_span(v, lines)
                else:
                    fields[name] = _moved(v, lines)
        copy.__dict__ = fields
        return copy
    if kind is list:
        return [v if type(v) in _LEAVES else _moved(v, lines) for v in value]  # type: ignore[attr-defined]
    if kind is tuple:
        return tuple([v if type(v) in _LEAVES else _moved(v, lines) for v in value])  # type: ignore[attr-defined]
    if isinstance(value, Span):
        return Span(value.file, value.line + lines, value.col, value.end_line + lines, value.end_col)
    if isinstance(value, (list, tuple)):
        return type(value)(_moved(v, lines) for v in value)
    return value


def _moved_span(span: Span, lines: int) -> Span:
    """Built without the frozen class's checked __init__ (a tree holds thousands): the same
    fields in the same order."""
    copy = _new(Span)
    d = copy.__dict__
    d.update(span.__dict__)
    d["line"] += lines
    d["end_line"] += lines
    return copy


def _syntax_diagnostic(file: str, e: UnexpectedInput, text: str) -> Diagnostic:
    line, col = getattr(e, "line", 1) or 1, getattr(e, "column", 1) or 1
    if isinstance(e, UnexpectedEOF) or (isinstance(e, UnexpectedToken) and e.token.type == "$END"):
        last = text.rstrip().splitlines() or [""]
        line = len(last)
        col = len(last[-1]) + 1
        return Diagnostic("E0102", "unexpected end of input: the declaration is not finished",
                          Span.point(file, line, col),
                          ([_expected(e)] if _expected(e) else []) + _hints(e, text, len(text), ""))
    if isinstance(e, UnexpectedCharacters):
        char = text[e.pos_in_stream] if e.pos_in_stream < len(text) else "?"
        shown = char if char.isprintable() else repr(char)
        return Diagnostic("E0101", f"unexpected character {shown!r}", Span.point(file, line, col))
    tok = e.token  # type: ignore[attr-defined]
    width = max(1, len(str(tok)))
    span = Span(file, line, col, line, col + width)
    note = _expected(e)
    pos = tok.start_pos if tok.start_pos is not None else len(text)
    return Diagnostic("E0101", f"unexpected {_describe(tok)}", span,
                      ([note] if note else []) + _hints(e, text, pos, str(tok)))


def _hints(e: UnexpectedInput, text: str, pos: int, token: str) -> list[str]:
    expected = set(getattr(e, "expected", None) or getattr(e, "allowed", None) or ())
    return parse_hints(text, pos, token, expected)


_PRETTY = {"NAME": "a name", "NUMBER": "a number", "STRING": "a string", "INT": "an integer",
           "TYVAR": "a type variable", "CMP_OP": "a comparison"}


def _describe(tok: Token) -> str:
    text = str(tok)
    if len(text) > 20:
        text = text[:20] + "..."
    return f"{_PRETTY.get(tok.type, 'token')} '{text}'" if tok.type in _PRETTY else f"'{text}'"


def _expected(e: UnexpectedInput) -> str:
    exp = getattr(e, "expected", None) or getattr(e, "allowed", None)
    if not exp:
        return ""
    names = []
    for name in sorted(exp):
        pretty = _PRETTY.get(name)
        if pretty is None:
            try:
                pretty = "'" + _lark().get_terminal(name).pattern.value + "'"
            except Exception:  # noqa: BLE001 - a name we cannot pretty-print is shown raw
                pretty = name
        names.append(pretty)
    if len(names) > 8:
        names = names[:8] + ["..."]
    return "expected " + ", ".join(names)


def parse_module(source: str, file: str = "<input>") -> tuple[A.Module, list[Diagnostic]]:
    """Parse a whole file, collecting one diagnostic per failed declaration chunk."""
    if len(source) > MAX_SOURCE_BYTES:
        return A.Module(file, [], source), [Diagnostic("E0104", "source file too large", Span.point(file, 1, 1))]
    if "\x00" in source:
        line = source.count("\n", 0, source.index("\x00")) + 1
        return A.Module(file, [], source), [Diagnostic("E0101", "unexpected NUL byte (is this a binary file?)",
                                                       Span.point(file, line, 1))]
    decls: list[A.Decl] = []
    diags: list[Diagnostic] = []
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old_limit, 20000))
    # Parsing makes many small objects that live on (the syntax tree) and few cycles: the cyclic
    # collector's passes over the growing heap cost 10-20% of a large file's parse (as in _check).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for first_line, text in split_chunks(source):
            if not text.strip():
                continue
            d, errs = parse_chunk(file, first_line, text)
            decls.extend(d)
            diags.extend(errs)
    finally:
        sys.setrecursionlimit(old_limit)
        if gc_was_enabled:
            gc.enable()
    return A.Module(file, decls, source), diags


def parse_expr(text: str, file: str = "<expr>") -> A.Expr:
    """Parse a single expression (used for `--param name=expr` values and tests)."""
    module, diags = parse_module(f"param __value : num = {text};", file)
    if diags:
        raise FuzzError(diags)
    decl = module.decls[0]
    assert isinstance(decl, A.ParamDecl) and decl.default is not None
    return decl.default
