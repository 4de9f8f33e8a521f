"""The store contract suite: one folder per port, named after the port's module
(``identity/`` for ``vancetope_brain/store/identity.py``, …), run against every backend.

``conftest.py`` parametrizes the ``storage`` fixture (and so ``backend`` and
every port fixture) over "sqlite", "postgres" (a real server), "mongomock" and,
only when ``VANCETOPE_TEST_MONGO_URL`` is set, "mongo" (a real server). Every
contract test runs on every backend — the concurrency ones too (mongomock through
``conftest.Serialised``: each single call atomic, as on a server); where MongoDB
documents a weaker guarantee, the test asserts that one there and names the gap.
A new adapter passes its port's folder unchanged before it is used. Top-level files are the
cross-port ones: tenancy across ports, schema versions, and ``test_ports.py``,
which holds every port to this layout.
"""
