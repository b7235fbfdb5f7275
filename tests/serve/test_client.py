"""The analyst's client (`--server`) sends the token to the URL it was given and nowhere else: a
redirect to another origin is not followed (it was followed, with the bearer token, 3 times out
of 3), and neither is a redirect to the same origin (E1016 names where it pointed)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from fuzzpy.diagnostics import FuzzError
from fuzzpy.serve import client


class _Recorder(BaseHTTPRequestHandler):
    seen: list = []
    target = ""

    def log_message(self, *args) -> None:  # quiet
        pass

    def _answer(self) -> None:
        type(self).seen.append((self.server.server_port, self.path, self.headers.get("Authorization")))
        if type(self).target:
            self.send_response(307)
            self.send_header("Location", type(self).target + self.path)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"analyst": "x", "role": "analyst"}')

    do_GET = do_POST = _answer


def _serve(target: str) -> ThreadingHTTPServer:
    handler = type("Handler", (_Recorder,), {"target": target})
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.mark.parametrize("same_origin", [False, True])
def test_a_redirect_is_not_followed_and_the_token_goes_nowhere_else(monkeypatch, same_origin):
    _Recorder.seen = []
    elsewhere = _serve("")
    here = _serve("")
    port = here.server_port if same_origin else elsewhere.server_port
    here.RequestHandlerClass.target = f"http://127.0.0.1:{port}/moved"
    monkeypatch.setenv("FUZZPY_TOKEN", "fzp_secret-token")
    try:
        with pytest.raises(FuzzError) as refused:
            client.request(f"http://127.0.0.1:{here.server_port}", "POST", "/v1/run", {"program": "x"})
    finally:
        here.shutdown()
        elsewhere.shutdown()
    diag = refused.value.diagnostics[0]
    assert diag.code == "E1016" and "redirect" in diag.message and "not followed" in diag.message
    assert [(p, t) for p, _, t in _Recorder.seen] == [(here.server_port, "Bearer fzp_secret-token")]
