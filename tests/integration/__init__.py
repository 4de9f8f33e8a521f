"""Multi-process integration tests (``@pytest.mark.slow``): real Redis, real Celery worker
and gunicorn OS processes, one SQLite file shared by all of them.

``worker_main`` and ``sender_main`` are the child processes' entry points; ``conftest``
starts them and always kills them at teardown. Only these tests may signal processes
(SIGKILL, SIGSTOP), and only the ones they started.
"""
