"""The admin CLI's part of the audit log: which ``vancetope admin`` commands are writes, each
recorded with its outcome (``audited``), and what each acts on.

Not recorded: reads, and ``migrate``, ``export`` and ``import``, which move the store as a
whole (an import must leave the store equal to its file).
"""

from __future__ import annotations

import argparse
import getpass
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vancetope_brain.services import AuditLog

AUDIT_PAGE = 50
"""``audit list --limit``'s default (``vancetope_brain.services.audit.PAGE_LIMIT``)."""

_DEFINITIONS = ("recipe", "strategy", "template")
"""The kinds with ``put`` and ``delete`` (``admin_cli.DEFINITION_KINDS`` and recipes)."""


@contextmanager
def audited(audit: AuditLog, args: argparse.Namespace) -> Iterator[None]:
    """Run the command of ``args``, recorded in the audit log if it is a write (a dry run
    writes nothing: it is not)."""
    target = AUDITED.get((args.admin_kind, args.admin_verb))
    action = ".".join(filter(None, (args.admin_kind, args.admin_verb)))  # ``purge`` has no verb
    acting = nullcontext() if target is None or getattr(args, "dry_run", False) else \
        audit.action(f"cli {_os_user()}", action, _tenant(args), target(args))
    with acting:
        yield


def _tenant(args: argparse.Namespace) -> str:
    """The tenant a write acts in (a created tenant's ``--id``); '' for all of them."""
    tenant = args.id if args.admin_kind == "tenant" else getattr(args, "tenant", None)
    return tenant or ""


def _os_user() -> str:
    """Who runs the CLI, for the audit log: the login name, else the numeric uid."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def _named(*names: str) -> Callable[[argparse.Namespace], str]:
    """An audit target: the named arguments that are set, ``name=value`` (never a secret:
    no command takes one)."""
    def target(args: argparse.Namespace) -> str:
        shown = []
        for name in names:
            value = getattr(args, name, None)
            if value not in (None, [], ""):
                values = value if isinstance(value, list) else [value]
                shown.append(f"{name}={','.join(str(v) for v in values)}")
        return " ".join(shown)
    return target


AUDITED: dict[tuple[str, str], Callable[[argparse.Namespace], str]] = {
    ("purge", ""): _named("tenant"),
    ("tenant", "create"): _named("id", "name"),
    ("project", "create"): _named("id", "name", "group"),
    ("user", "create"): _named("id", "name"),
    ("token", "create"): _named("user", "role", "label"),
    ("token", "revoke"): _named("token_id"),
    **{(kind, verb): _named("project", "name", "file") for kind in _DEFINITIONS
       for verb in ("put", "delete")},
    ("dead-letter", "requeue"): _named("message_id"),
    ("tool-health", "reset"): _named("project", "server", "tool"),
    ("docs", "add"): _named("project", "files"),
    ("docs", "rm"): _named("project", "names"),
    ("setting", "set"): _named("project", "user", "key"),
    ("setting", "unset"): _named("project", "user", "key"),
    ("webhook", "create"): _named("project", "url", "events"),
    **{("webhook", verb): _named("subscription_id")
       for verb in ("enable", "disable", "rotate-secret", "delete")},
    ("webhook", "redeliver"): _named("delivery_id"),
    **{("schedule", verb): _named("schedule_id") for verb in ("pause", "resume", "delete")},
}
"""The write commands, each with what it acts on (never a secret: no command takes one)."""
