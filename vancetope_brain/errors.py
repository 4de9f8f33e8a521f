"""Every exception Vancetope raises on purpose.

    VancetopeError
    ├── UserError                 bad input from a client, a recipe or the config; never retried
    │   ├── InvalidInput          (code ``invalid_input``)
    │   ├── NotFound              (code ``not_found``) — also what a foreign tenant's id looks like
    │   ├── Conflict              (code ``conflict``) — the request is illegal in the current state
    │   ├── Unauthorized          (code ``unauthorized``)
    │   ├── Forbidden             (code ``forbidden``) — a signed link that is forged or expired
    │   ├── RateLimited           (code ``rate_limited``)
    │   ├── ConfigError           (code ``config_error``)
    │   └── UnknownEngine         (code ``unknown_engine``)
    ├── RuntimeFailure            something below us failed; may succeed later
    │   ├── StoreError            (code ``store_error``)
    │   └── LlmError              (code ``llm_error``)
    └── Signal                    control flow, never shown to a user
        └── Fenced                the lane lease was taken over; this worker must write nothing

Each error carries a stable ``code`` that the protocol puts on the wire.
"""

from __future__ import annotations


class VancetopeError(Exception):
    """Base of every error Vancetope raises on purpose."""

    code = "internal"


class UserError(VancetopeError):
    """Raised when the caller asked for something malformed or illegal."""

    code = "invalid_input"


class InvalidInput(UserError):
    """Raised when input fails validation (a frame, a body, a field)."""


class NotFound(UserError):
    """Raised when a record does not exist or belongs to another tenant or user."""

    code = "not_found"


class Conflict(UserError):
    """Raised when the request is illegal in the record's current state (e.g. steer on CLOSED)."""

    code = "conflict"


class Unauthorized(UserError):
    """Raised when a request carries no valid credentials."""

    code = "unauthorized"


class Forbidden(UserError):
    """Raised when a signed link (an attachment URL) is forged, malformed or expired."""

    code = "forbidden"


class RateLimited(UserError):
    """Raised when a connection exceeds its request rate."""

    code = "rate_limited"


class ConfigError(UserError):
    """Raised when the environment configuration is invalid."""

    code = "config_error"


class UnknownEngine(UserError):
    """Raised when an engine name is not registered; the message suggests the closest name."""

    code = "unknown_engine"


class RuntimeFailure(VancetopeError):
    """Raised when a dependency failed; the same call may succeed later."""

    code = "runtime_failure"


class StoreError(RuntimeFailure):
    """Raised when the store cannot be read or written."""

    code = "store_error"


class LlmError(RuntimeFailure):
    """Raised when the LLM endpoint fails after its retries (timeout, 5xx, bad response)."""

    code = "llm_error"


class Signal(VancetopeError):  # noqa: N818 - a signal, not an error
    """Base of control-flow exceptions; never reported to a user."""


class Fenced(Signal):
    """Raised when this worker's lane lease or epoch was taken over; it must write nothing."""

    code = "fenced"
