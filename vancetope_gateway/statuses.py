"""The HTTP status of each Vancetope error, for every REST door (``app.py``'s routes, the
operators' ``/admin/``, the OpenAI-compatible ``/v1/``)."""

from __future__ import annotations

from vancetope_brain.errors import (
    Conflict,
    DocumentTooLarge,
    Forbidden,
    InputTooLarge,
    LimitExceeded,
    NotFound,
    ProjectKnowledgeFull,
    RateLimited,
    ReplyTimeout,
    RuntimeFailure,
    TenantKnowledgeFull,
    Unauthorized,
    UnreadableDocument,
    UnsupportedDocument,
    UserError,
    VancetopeError,
)

_STATUS: dict[type[VancetopeError], int] = {
    Unauthorized: 401, Forbidden: 403, NotFound: 404, Conflict: 409, RateLimited: 429,
    DocumentTooLarge: 413, InputTooLarge: 413, ProjectKnowledgeFull: 409, TenantKnowledgeFull: 409,
    LimitExceeded: 429, UnsupportedDocument: 415, UnreadableDocument: 422,
    UserError: 400, RuntimeFailure: 503, ReplyTimeout: 504}
"""The HTTP status of an error class; a subclass has its nearest ancestor's
(``errors.py``'s tree), so a new error gets a fitting status without an entry here."""


def http_status(error: VancetopeError) -> int:
    """400 for a client's error without a status of its own, 503 for a failure below us
    (the same call may succeed later), 500 for anything else."""
    return next((_STATUS[c] for c in type(error).__mro__ if c in _STATUS), 500)
