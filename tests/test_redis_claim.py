"""A test run's Redis database is its own: another run cannot claim it."""

from __future__ import annotations

import pytest

from tests.redis_claim import NoFreeDatabase, RunDatabase


def test_a_database_another_run_holds_cannot_be_claimed(run_database: RunDatabase):
    with pytest.raises(NoFreeDatabase, match="no free Redis database for this test run"):
        RunDatabase.claim(run_database.url)
    run_database.reset()  # still this run's
