"""Exit codes, and the coded error that stands for a bug: shared by every command and by the
curator service, which answers with the exit code the command line would have given."""

from __future__ import annotations

from ..diagnostics import Diagnostic

EXIT_OK, EXIT_PROGRAM, EXIT_USAGE, EXIT_BUDGET, EXIT_RUNTIME = 0, 1, 2, 3, 4
USAGE_CODES = {"E0211"}  # a --param the program does not declare, or a parameter given no value: the command line's


def exit_code_for(diags: list[Diagnostic]) -> int:
    """0 without errors; 4 for data, ledger, service and engine errors; 2 for usage errors
    (E07xx, and the parameters given on the command line: E0211); 3 over budget; 1 for errors
    in the program (docs/errors.md)."""
    errors = {d.code for d in diags if d.severity == "error"}
    codes = {c[:3] for c in errors}
    if not codes:
        return EXIT_OK
    if codes & {"E05", "E06", "E10", "E21"}:
        return EXIT_RUNTIME
    if all(c[:3] == "E07" or c in USAGE_CODES for c in errors):
        return EXIT_USAGE
    if codes <= {"E04"}:
        return EXIT_BUDGET
    return EXIT_PROGRAM


def internal_error(kind: type) -> Diagnostic:
    """A bug in fuzzpy or a dependency, as a coded error.  Only the exception's type is shown:
    its message or a traceback (with local variables) could quote private data."""
    return Diagnostic("E0901", f"internal error in fuzzpy ({kind.__name__}); this is a bug, "
                               "please report it with the command you ran",
                      None, ["no details are shown, because they could contain private data"])
