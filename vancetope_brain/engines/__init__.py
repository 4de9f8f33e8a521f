"""Think engines: the base class, the registry and one module per engine.

Rule: engines are stateless; everything they know comes from the process
document and the ``ThinkEngineContext`` of the current call, and every
effect goes out through that context (never a client, a store or Redis).
"""

# Importing an engine module registers it.
from vancetope_brain.engines import agrajag, arthur, ford, marvin, vogon, zaphod  # noqa: E402,F401,I001
from vancetope_brain.engines.base import (
    ENGINES,
    EngineRegistry,
    ParentReport,
    ThinkEngine,
    register_engine,
    shown_process,
)
from vancetope_brain.engines.context import ThinkEngineContext

__all__ = ["ENGINES", "EngineRegistry", "ParentReport", "ThinkEngine", "ThinkEngineContext",
           "register_engine", "shown_process"]
