"""The HTTP API of the curator service (FastAPI on uvicorn).  Needs the `serve` extra.

Every request passes the gate first (gate.py: authenticated before its body is read, the body
bounded in size and nesting, audited whatever happens); checks and runs are done by worker
processes shared fairly among analysts (workers.py).  Errors are JSON `{"ok": false,
"diagnostics": [...]}` with a stable code, never a traceback and never anything computed from the
data.  The OpenAPI description is at /v1/openapi.json (with a token too).
"""

from __future__ import annotations

import hashlib
from typing import Any, Optional, Union

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..diagnostics import Diagnostic, FuzzError
from .audit import AuditLog
from .gate import Gate
from .service import ProgramRequest, RequestError, Service

API = "/v1"


class ProgramBody(BaseModel):
    """A program to check or run against registered datasets."""

    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not a silent default

    program: str = Field(description="The program's source text (fuzzpy language).")
    file: str = Field("program.fz", description="The program's name, used in locations and output.")
    dataset: Union[str, list[str]] = Field(description="Dataset name, or PARAMETER=NAME for each table.")
    params: dict[str, str] = Field(default_factory=dict, description="Public parameters NAME: VALUE.")
    entry: str = Field("main", description="The entry point.")
    budget: Optional[str] = Field(None, description="Refuse if the program's epsilon exceeds this.")
    format: str = Field("json", description="json or text (check: also sarif).")
    delta: Optional[str] = Field(None, description="The delta to state the run at, in (0, 1): at most the "
                                                   "dataset's delta; none on a pure dataset (docs/serve.md).")

    def to_request(self) -> ProgramRequest:
        datasets = [self.dataset] if isinstance(self.dataset, str) else list(self.dataset)
        return ProgramRequest(self.program, self.file, datasets, dict(self.params), self.entry, self.budget,
                              self.format, self.delta)


class Outcome(BaseModel):
    """Exactly what the command line prints: `result` is the JSON document of `fuzzpy run
    --format json` (or `fuzzpy check --format json|sarif`), `stdout` the text output, `stderr`
    the diagnostics, `exit_code` the command's exit code."""

    exit_code: int
    result: Optional[Any] = None
    stdout: Optional[str] = None
    stderr: str
    epsilon: Optional[str] = None


def failure(status: int, diags: list[Diagnostic]) -> JSONResponse:
    return JSONResponse({"ok": False, "diagnostics": [d.to_json() for d in diags]}, status_code=status)


def create_app(service: Service, audit: Optional[AuditLog] = None, pool: Any = None) -> Any:
    """The ASGI application (the gate around the API) and the API itself.  `pool`: the worker
    processes that check and run (workers.WorkerPool); without one, this process does (tests)."""
    audit = audit or AuditLog("-")
    app = FastAPI(title="fuzzpy curator service", version="1",
                  description="Check and run differentially private fuzzpy programs against registered "
                              "datasets. Every endpoint needs 'Authorization: Bearer TOKEN'.",
                  openapi_url=None, docs_url=None, redoc_url=None)

    @app.exception_handler(RequestError)
    async def refused(request: Request, exc: RequestError) -> JSONResponse:
        request.state.audit["code"] = exc.diagnostic.code
        return failure(exc.status, [exc.diagnostic])

    @app.exception_handler(FuzzError)
    async def fuzz_error(request: Request, exc: FuzzError) -> JSONResponse:
        request.state.audit["code"] = exc.diagnostics[0].code if exc.diagnostics else None
        return failure(500 if any(d.code == "E0602" for d in exc.diagnostics) else 400, exc.diagnostics)

    @app.exception_handler(RequestValidationError)
    async def malformed(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own answer quotes the input back; this one names the fields only.
        fields = sorted({".".join(str(p) for p in e.get("loc", ())[1:]) or "body" for e in exc.errors()})
        request.state.audit["code"] = "E1006"
        return failure(400, [Diagnostic("E1006", f"malformed request: check the field(s) {', '.join(fields)[:200]}")])

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = "E1019" if exc.status_code in (404, 405) else "E1006"
        return failure(exc.status_code, [Diagnostic(code, f"no endpoint {request.method} {request.url.path[:100]}"
                                                    if code == "E1019" else "malformed request")])

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> JSONResponse:
        request.state.audit["code"] = "E0901"
        request.state.audit["internal"] = type(exc).__name__
        return failure(500, [Diagnostic("E0901", f"internal error in the service ({type(exc).__name__}); "
                                                 "no details are shown, because they could contain private data")])

    async def who(request: Request) -> Any:
        return request.state.analyst  # authenticated by the gate before the body was read

    async def work(kind: str, analyst: Any, req: ProgramRequest) -> dict:
        if pool is not None:
            return await pool.submit(analyst, kind, req)
        return await run_in_threadpool(service.check if kind == "check" else service.run, analyst, req)

    def note_program(request: Request, body: ProgramBody) -> ProgramRequest:
        req = body.to_request()
        request.state.audit.update(datasets=req.datasets, file=req.file[:100], entry=req.entry[:100],
                                   program_sha256=hashlib.sha256(req.program.encode("utf-8", "surrogatepass"))
                                   .hexdigest())
        return req

    @app.get(f"{API}/openapi.json", summary="This API's OpenAPI description")
    async def openapi(request: Request) -> Any:
        await who(request)
        return app.openapi()

    @app.get(f"{API}/whoami", summary="Who the token belongs to")
    async def whoami(request: Request) -> Any:
        analyst = await who(request)
        return {"analyst": analyst.name, "role": analyst.role}

    @app.get(f"{API}/datasets", summary="The published schemas of the datasets available to you")
    async def datasets(request: Request) -> Any:
        analyst = await who(request)
        return await run_in_threadpool(service.schemas, analyst)

    @app.get(f"{API}/datasets/{{name}}/schema", summary="One dataset's published schema")
    async def schema(name: str, request: Request) -> Any:
        analyst = await who(request)
        return await run_in_threadpool(service.schema, analyst, name)

    @app.post(f"{API}/check", response_model=Outcome, response_model_exclude_none=False,
              summary="Check a program against a dataset's schema: reads no data, charges nothing")
    async def check(body: ProgramBody, request: Request) -> Any:
        analyst = await who(request)
        req = note_program(request, body)
        out = await work("check", analyst, req)
        request.state.audit.update(exit_code=out["exit_code"], epsilon=out.get("epsilon"))
        return JSONResponse(out)

    @app.post(f"{API}/run", response_model=Outcome,
              summary="Check, charge and run a program; returns what `fuzzpy run` prints")
    async def run(body: ProgramBody, request: Request) -> Any:
        analyst = await who(request)
        req = note_program(request, body)
        request.state.audit["stage"] = "started"
        out = await work("run", analyst, req)
        result = out.get("result") if isinstance(out.get("result"), dict) else {}
        ledger = result.get("ledger") or {}
        request.state.audit.update(stage=result.get("stage", "released" if out["exit_code"] == 0 else None),
                                   exit_code=out["exit_code"], epsilon=out.get("epsilon"),
                                   runs=[c.get("id") for c in ledger.get("charges", [])] or None)
        return JSONResponse(out)

    @app.get(f"{API}/spending", summary="Your own spending and remaining budget, per dataset")
    async def spending(request: Request) -> Any:
        analyst = await who(request)
        return await run_in_threadpool(service.spending, analyst)

    @app.get(f"{API}/ledger", summary="The curator's view: every dataset's and analyst's spending")
    async def ledger(request: Request) -> Any:
        analyst = await who(request)
        return await run_in_threadpool(service.ledger_view, analyst)

    return Gate(app, service.authenticate, audit, service.limits.max_request_bytes), app
