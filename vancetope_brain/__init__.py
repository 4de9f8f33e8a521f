"""Vancetope's domain and runtime: models, the store ports, lanes, engines, LLM, events.

Rule: this package imports no Flask and no Celery (ruff TID251 and
``tests/test_boundaries.py`` hold the line). The outside world reaches it
through plain function calls; it reaches the broker only through the
``Waker`` port that ``workers/`` implements.
"""

__version__ = "0.1.0"
