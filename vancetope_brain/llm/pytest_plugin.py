"""Pytest plugin: every test runs with non-loopback network access blocked.

Register it in ``tests/conftest.py`` with ``pytest_plugins = ["vancetope_brain.llm.pytest_plugin"]``
(or ``-p vancetope_brain.llm.pytest_plugin``). A test that truly needs the
network opts out with ``@pytest.mark.allow_network``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from vancetope_brain.llm.testing import block_network


def pytest_configure(config: pytest.Config) -> None:
    # Registered here so the opt-out marker works under --strict-markers.
    config.addinivalue_line(
        "markers", "allow_network: let this test connect to non-loopback addresses"
    )


@pytest.fixture(autouse=True)
def _block_network(request: pytest.FixtureRequest) -> Iterator[None]:
    """Refuse non-loopback connections for the test, unless it is marked ``allow_network``."""
    if request.node.get_closest_marker("allow_network") is not None:
        yield
        return
    with block_network():
        yield
