"""`fuzzpy lsp`: start the language server (mounted by cli.py through `register`)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("lsp")
    def lsp(
        stdio: bool = typer.Option(True, "--stdio/--no-stdio",
                                   help="Talk LSP over stdin/stdout (the only transport; the flag is "
                                        "accepted because editors pass it)."),
        log_level: str = typer.Option("warning", "--log-level", help="Server log level on stderr."),
        peer: bool = typer.Option(True, "--peer/--no-peer",
                                  help="Check half of each full check (a param's new value, an opened "
                                       "file) in a second process, on machines with 2 cores or more."),
    ) -> None:
        """Start the fuzzpy language server on stdin/stdout (for editors)."""
        import logging

        from . import lsp as server

        if not stdio:
            raise typer.BadParameter("only --stdio is supported")
        level = getattr(logging, log_level.upper(), logging.WARNING)
        # The level is the server's own log's; the libraries' (pygls logs every message body at
        # info) follow it only at debug, and warn otherwise.
        logging.basicConfig(level=level if level <= logging.DEBUG else max(level, logging.WARNING),
                            format="fuzzpy-lsp %(levelname)s %(message)s")
        logging.getLogger("fuzzpy").setLevel(level)
        server.main(peer=peer)
