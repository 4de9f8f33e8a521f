"""Shared fixtures. Real Redis for anything that runs lanes or events across OS processes;
fakeredis only for the embedded shape.

Each test run — each pytest-xdist worker — claims its own Redis database
(``tests/redis_claim.py``) the first time a test asks for ``redis_url``: one of 1..15 at 127.0.0.1:6379 that no client is connected
to and no other run holds, or the one ``VANCETOPE_TEST_REDIS_URL`` pins. Every test gets
it empty; the run flushes no other database and releases its own at exit. Likewise each
run creates its own PostgreSQL database (``tests/postgres_db.py``) the first time a test asks
for ``postgres_url``, and each such test gets a schema of its own in it.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis

from tests.helpers import server_env
from tests.postgres_db import SERVER as POSTGRES_SERVER
from tests.postgres_db import RunDatabase as PostgresRunDatabase
from tests.redis_claim import SERVER, NoFreeDatabase, RunDatabase
from vancetope_brain import keys
from vancetope_brain.config import Config
from vancetope_brain.identity import Principal
from vancetope_brain.llm import ChatModel
from vancetope_brain.models import Project, User
from vancetope_brain.store import Backend, IdentityStore, open_store
from vancetope_gateway.parts import Gateway, build_gateway
from workers.celery_app import create_celery, enqueue_index_on, enqueue_on
from workers.embedded import EmbeddedWorker
from workers.parts import Worker

pytest_plugins = ["vancetope_brain.llm.pytest_plugin", "tests.log_secrets", "tests.run_report",
                  "tests.scheduling", "pytester"]

# ``vancetope serve`` records where it listens in the user's state directory
# (vancetope_gateway/discovery.py), and ``vancetope chat`` reads it: a test run neither writes
# the user's own record nor reads another run's. Every server a test starts inherits this.
_STATE_HOME = tempfile.mkdtemp(prefix="vancetope-test-state-")
os.environ["XDG_STATE_HOME"] = _STATE_HOME
atexit.register(shutil.rmtree, _STATE_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def run_database() -> Iterator[RunDatabase]:
    """The Redis database this test run claimed."""
    pinned = os.environ.get("VANCETOPE_TEST_REDIS_URL")
    if pinned and int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
        pytest.fail(f"VANCETOPE_TEST_REDIS_URL pins one database ({pinned}), which one "
                    "process holds: run the tests in one process (-n0 or -n1)")
    try:
        database = RunDatabase.claim(pinned)
    except redis.ConnectionError as e:
        pytest.fail(f"Redis is not answering at {pinned or SERVER}: start it with "
                    f"`redis-server --daemonize yes --port 6379 --save ''` ({e})")
    except NoFreeDatabase as e:
        pytest.fail(str(e))
    yield database
    database.release()


@pytest.fixture(scope="session")
def postgres_run_database() -> Iterator[PostgresRunDatabase]:
    """The PostgreSQL database this test run created."""
    try:
        database = PostgresRunDatabase()
    except psycopg.OperationalError as e:
        pytest.fail(f"PostgreSQL is not answering at {POSTGRES_SERVER}: start it (Debian: "
                    f"`pg_ctlcluster 15 main start`) or point VANCETOPE_TEST_POSTGRES_URL at "
                    f"a server where this user may create databases ({e})")
    yield database
    database.drop()


@pytest.fixture
def postgres_url(postgres_run_database: PostgresRunDatabase) -> Iterator[str]:
    """A store URL on an empty schema of this run's PostgreSQL database, for this test."""
    with postgres_run_database.schema() as url:
        yield url


@pytest.fixture
def redis_url(run_database: RunDatabase) -> str:
    """The URL of this run's Redis database, emptied for the test."""
    run_database.reset()
    return run_database.url


class Embedded:
    """The embedded shape: a gateway's parts (``brain``) and a real in-process Celery worker
    (memory:// broker, fakeredis, SQLite) whose parts are ``worker_parts``.

    Tests set ``model`` to the double their turns should use.
    """

    def __init__(self, data_dir: Path, **env: str) -> None:
        self.model: ChatModel | None = None
        config = Config.from_env(server_env(data_dir, **env))
        config.data_dir.mkdir(parents=True, exist_ok=True)
        store = open_store(config.store_url)
        app = create_celery(config, model_for=lambda process: self.model, store=store)
        self.brain: Gateway = build_gateway(config, enqueue_on(app), enqueue_index=enqueue_index_on(app),
                                             store=store)
        # The in-memory Redis is the test run's, shared by every app: a shard's queued flag
        # that another app set (its task in that app's broker, or nowhere) would hold this
        # app's wakes of the shard back until it expires.
        for flag in self.brain.redis.scan_iter(match=keys.shard_queued("*")):
            self.brain.redis.delete(flag)
        self.worker_parts: Worker = app.vancetope_worker()
        self.worker = EmbeddedWorker(app, concurrency=4)
        self.worker.start()
        self.brain.identity.create_tenant("acme", "acme")
        self.brain.identity.create_user("acme", "ada", "ada")
        self.who = Principal("acme", "ada")

    def stop(self) -> None:
        # Celery's consumer loop notices a stop only every 2 s, hence one worker per module.
        self.worker.stop()
        self.worker_parts.close()


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Embedded]:
    emb = Embedded(tmp_path_factory.mktemp("embedded"))
    yield emb
    emb.stop()


@pytest.fixture
def acme_store(tmp_path: Path) -> Iterator[Backend]:
    """A fresh SQLite store holding project ``p1`` and user ``ada`` of tenant ``acme``."""
    opened = open_store(f"sqlite:///{tmp_path / 'v.db'}")
    opened.port(IdentityStore).create_project(Project(id="p1", tenant_id="acme", name="One"))
    opened.port(IdentityStore).create_user(User(id="ada", tenant_id="acme", name="Ada"))
    yield opened
    opened.close()
