"""The run pipeline that every interface calls (docs/architecture.md): check -> budget -> load ->
charge -> run -> release (`session.py`), the one charge path (`charge.py`), the guarantee of a
checked program (`guarantee.py`), budgets (`budget.py`), and the outcome as printed (`output.py`)."""
