"""The curator service (`fuzzpy serve`): registered datasets, analysts with tokens and caps,
and an HTTP API that checks and runs programs where the data lives (docs/serve.md).

The HTTP server (`app.py`) needs the `serve` extra (FastAPI, uvicorn); the client
(`client.py`), the registry and the SQLite store need nothing beyond fuzzpy itself.
"""
