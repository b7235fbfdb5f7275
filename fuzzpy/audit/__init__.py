"""Empirical privacy auditing: a statistical lower bound on a program's or mechanism's true
epsilon, compared with the checker's claim (docs/audit.md).

    from fuzzpy.audit import audit_sampler, audit_mechanism, audit_program, AuditConfig

Submodules: stats (Clopper-Pearson, sample sizes), outputs (encoding outputs), events (candidate
events), neighbours (synthetic neighbouring tables), search (the pipeline), mechanisms and
programs (audit targets), auditor (the API), report (text and JSON).
"""

from __future__ import annotations

from typing import Any

__all__ = ["AuditConfig", "AuditResult", "audit_mechanism", "audit_program", "audit_sampler"]


def __getattr__(name: str) -> Any:  # lazy: importing fuzzpy.audit costs nothing until used
    if name == "AuditConfig":
        from .search import AuditConfig

        return AuditConfig
    if name in ("AuditResult", "audit_mechanism", "audit_program", "audit_sampler"):
        from . import auditor

        return getattr(auditor, name)
    raise AttributeError(name)
