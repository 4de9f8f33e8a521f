"""Every port is small, has an adapter in every backend, and has its contract folder."""

from __future__ import annotations

from pathlib import Path

import pytest

import vancetope_brain.store as store
from vancetope_brain.store import Backend, Port
from vancetope_brain.store.backend import import_adapters

# Importing every module of the package imports every port and every backend.
import_adapters(store.__name__, store.__path__)
PORTS = sorted(Port.__subclasses__(), key=lambda port: port.__name__)
BACKENDS = sorted(Backend.__subclasses__(), key=lambda backend: backend.__name__)
MAX_METHODS = 12  # STYLE.md 4: a port that grows past a dozen methods is two ports


def test_the_ports_and_backends_are_found() -> None:
    assert len(PORTS) >= 7
    assert {backend.__name__ for backend in BACKENDS} >= {"SqliteBackend", "MongoBackend"}


@pytest.mark.parametrize("port", PORTS, ids=lambda port: port.__name__)
def test_a_port_has_at_most_a_dozen_methods(port: type[Port]) -> None:
    assert 0 < len(port.__abstractmethods__) <= MAX_METHODS, sorted(port.__abstractmethods__)


@pytest.mark.parametrize("port", PORTS, ids=lambda port: port.__name__)
def test_every_backend_has_a_complete_adapter_of_each_port(port: type[Port]) -> None:
    for backend in BACKENDS:
        adapter = backend.adapters.get(port)
        assert adapter is not None, f"{backend.__name__} has no adapter of {port.__name__}"
        assert issubclass(adapter, port)
        assert not adapter.__abstractmethods__, (adapter.__name__, adapter.__abstractmethods__)


@pytest.mark.parametrize("port", PORTS, ids=lambda port: port.__name__)
def test_a_port_has_a_contract_folder_named_after_its_module(port: type[Port]) -> None:
    folder = Path(__file__).parent / port.__module__.rsplit(".", 1)[-1]
    assert (folder / "__init__.py").is_file(), f"no contract folder {folder} for {port.__name__}"
    assert list(folder.glob("test_*.py")), f"no tests in {folder}"
