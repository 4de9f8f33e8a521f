"""Opening a storage and reaching its ports.

A ``Backend`` is one storage (a SQLite file, a PostgreSQL or MongoDB database) with one
adapter per port on it, made when it opens; ``backend.port(LaneStore)`` is that
adapter. Adapters register themselves: an adapter class names its backend by
subclassing the backend's adapter base and its port by subclassing the port
(``class SqliteLanes(SqliteAdapter, LaneStore)``), and every module of a
backend's package is imported when the package is. So a new capability is one
port module, one adapter module per backend and one contract folder under
``tests/store_contract/`` — nothing else changes.
"""

from __future__ import annotations

import importlib
import pkgutil
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, ClassVar, TypeVar, cast

from vancetope_brain.errors import ConfigError


class Port(ABC):  # noqa: B024 - a marker base; each port declares its own methods
    """Base of every port: one small capability of the store, a documented base class
    whose docstrings state atomicity and ordering.

    Guarantees common to every port: a record of another tenant is
    indistinguishable from a missing one (``NotFound`` / ``None`` / absent from
    lists); records are pydantic documents, never adapter types; a write is
    durable when the method returns.
    """


P = TypeVar("P", bound=Port)


class Adapter:
    """Base of a backend's adapter base class, which declares ``registry = {}``; each
    concrete adapter below it is entered there under the port it implements."""

    registry: ClassVar[dict[type[Port], type[Any]]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        ports = [base for base in cls.__mro__ if base is not Port and issubclass(base, Port)
                 and Port in base.__bases__]
        if ports:
            if ports[0] in cls.registry:
                raise TypeError(f"two adapters for {ports[0].__name__}: "
                                f"{cls.registry[ports[0]].__name__} and {cls.__name__}")
            cls.registry[ports[0]] = cls


def import_adapters(package: str, path: Iterable[str]) -> None:
    """Import every module of a backend's package, so its adapters register."""
    for module in pkgutil.iter_modules(path):
        importlib.import_module(f"{package}.{module.name}")


class Backend(ABC):
    """One storage and the adapter of every port on it."""

    adapters: ClassVar[dict[type[Port], type[Any]]]
    """The backend's registry (its adapter base's ``registry``)."""

    def __init__(self) -> None:
        """Make one adapter per registered port; a subclass opens its storage first."""
        self._ports: dict[type[Port], Port] = {
            port: adapter(self) for port, adapter in self.adapters.items()}

    def port(self, kind: type[P]) -> P:
        """This backend's adapter of port ``kind``."""
        try:
            return cast(P, self._ports[kind])
        except KeyError:
            raise ConfigError(f"{type(self).__name__} has no adapter for "
                              f"{kind.__name__}") from None

    def schema_version(self) -> int | None:
        """The version of the storage's schema as a whole (brought up to this server's when
        the backend opened), or None where each record carries its own (MongoDB)."""
        return None

    @abstractmethod
    def ping(self) -> None:
        """Raise ``StoreError`` unless the storage answers."""

    @abstractmethod
    def close(self) -> None:
        """Release connections."""


def open_store(url: str) -> Backend:
    """Open the backend named by the URL: ``sqlite:///path``, ``postgresql://…`` or
    ``mongodb://…``."""
    if url.startswith("sqlite:///"):
        from vancetope_brain.store.sqlite import SqliteBackend

        return SqliteBackend(url.removeprefix("sqlite:///"))
    if url.startswith(("postgresql://", "postgres://")):
        from vancetope_brain.store.postgres import PostgresBackend

        return PostgresBackend(url)
    if url.startswith(("mongodb://", "mongodb+srv://")):
        from vancetope_brain.store.mongo import MongoBackend

        return MongoBackend(url)
    raise ConfigError(
        f"unsupported VANCETOPE_STORE_URL {url!r}: use sqlite:///PATH, "
        "postgresql://USER@HOST/DB or mongodb://HOST/DB"
    )
