"""The operators' audit log: one record per operator action (docs/operations.md, "Operators")."""

from __future__ import annotations

from datetime import datetime

from vancetope_brain.models.base import Document


class AuditRecord(Document):
    """What an operator did, and how it ended. Holds no secret: a created token appears by
    its id, never by its secret.

    ``tenant_id``: the tenant acted in (a created tenant's own id). ``actor``: who —
    ``user USER token TOKEN`` for the ``/admin/`` API, ``cli OSUSER`` for the admin CLI.
    ``action``: what, ``kind.verb`` (``token.create``). ``target``: the object acted on (an
    id, or a filter such as ``project=p server=s``). ``outcome``: ``ok``, or the stable
    error code the action ended with (``not_found``, ``conflict``, …). ``at`` is whole
    milliseconds (as every backend keeps it)."""

    id: str
    tenant_id: str
    at: datetime
    actor: str
    action: str
    target: str
    outcome: str
