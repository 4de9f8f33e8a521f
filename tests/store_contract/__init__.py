"""The Store contract suite: one file per capability, run against every adapter.

``conftest.py`` parametrizes the ``store`` fixture over "sqlite", "mongomock"
and, only when ``VANCETOPE_TEST_MONGO_URL`` is set, "mongo" (a real server).
A new adapter passes this suite unchanged before it is used.
"""
