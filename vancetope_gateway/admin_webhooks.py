"""``vancetope admin webhook …``: a tenant's webhook subscriptions as an operator on a host
manages them (issue 33 part 2; the ``webhook-*`` frames are the users' door). The operator
sees and changes every subscription of the tenant; ``create`` and ``rotate-secret`` print
the secret, once, on stdout."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from vancetope_brain.identity import Principal
from vancetope_brain.models import Role
from vancetope_brain.models.webhooks import WebhookEvent
from vancetope_gateway.admin_text import note, table, when

if TYPE_CHECKING:
    from vancetope_brain.runtime import Administration

OPERATOR = "operator"
"""The ``createdBy`` of a subscription made here."""


def add_webhook(verbs: Callable[[str, str], argparse._SubParsersAction[argparse.ArgumentParser]],
                quiet: argparse.ArgumentParser) -> None:
    """The ``webhook`` commands of ``vancetope admin``."""
    webhook = verbs("webhook", "a tenant's webhook subscriptions and their delivery logs")
    tenant = argparse.ArgumentParser(add_help=False)
    tenant.add_argument("--tenant", required=True)
    p = webhook.add_parser("create", parents=[tenant, quiet],
                           help="subscribe a URL to events of a project; prints the id, then "
                                "the secret (shown this once)")
    p.add_argument("--project", required=True)
    p.add_argument("--url", required=True)
    p.add_argument("--event", dest="events", action="append", required=True,
                   choices=[e.value for e in WebhookEvent], help="repeat for more events")
    p.add_argument("--description", default="")
    p = webhook.add_parser("list", parents=[tenant], help="the tenant's subscriptions")
    p.add_argument("--project")
    for verb, summary in (("enable", "deliver again from now on"),
                          ("disable", "stop delivering (pending deliveries go DEAD)"),
                          ("rotate-secret", "a new secret, printed once; the old one stops"),
                          ("delete", "remove the subscription and its delivery log")):
        p = webhook.add_parser(verb, parents=[tenant, quiet], help=summary)
        p.add_argument("subscription_id", metavar="SUBSCRIPTION")
    p = webhook.add_parser("deliveries", parents=[tenant],
                           help="a subscription's deliveries, newest first, with their attempts")
    p.add_argument("subscription_id", metavar="SUBSCRIPTION")
    p.add_argument("--limit", type=int, default=20)
    p = webhook.add_parser("redeliver", parents=[tenant, quiet],
                           help="send a delivered or dead delivery again (same webhook-id)")
    p.add_argument("delivery_id", metavar="DELIVERY")


def _operator(admin: Administration, args: argparse.Namespace) -> Principal:
    admin.identity.require_tenant(args.tenant)
    return Principal(args.tenant, OPERATOR, role=Role.OPERATOR)


def _create(admin: Administration, args: argparse.Namespace) -> None:
    sub = admin.webhooks.create(_operator(admin, args), args.project, args.url,
                                [WebhookEvent(e) for e in args.events], args.description)
    print(sub.id)
    print(sub.secret)
    note(args, "the secret is shown this once: keep it to verify the signatures")


def _list(admin: Administration, args: argparse.Namespace) -> None:
    subs = admin.webhooks.list(_operator(admin, args), args.project)
    table(("ID", "PROJECT", "ENABLED", "EVENTS", "URL"),
          [(s.id, s.project_id, "yes" if s.enabled else "no",
            ",".join(e.value for e in s.events), s.url) for s in subs])


def _enable(admin: Administration, args: argparse.Namespace) -> None:
    admin.webhooks.update(_operator(admin, args), args.subscription_id, enabled=True)
    note(args, f"enabled {args.subscription_id}")


def _disable(admin: Administration, args: argparse.Namespace) -> None:
    admin.webhooks.update(_operator(admin, args), args.subscription_id, enabled=False)
    note(args, f"disabled {args.subscription_id}")


def _rotate(admin: Administration, args: argparse.Namespace) -> None:
    print(admin.webhooks.rotate_secret(_operator(admin, args), args.subscription_id).secret)
    note(args, "the new secret is shown this once; the old one signs nothing any more")


def _delete(admin: Administration, args: argparse.Namespace) -> None:
    admin.webhooks.delete(_operator(admin, args), args.subscription_id)
    note(args, f"deleted {args.subscription_id} and its delivery log")


def _deliveries(admin: Administration, args: argparse.Namespace) -> None:
    found = admin.webhooks.deliveries(_operator(admin, args), args.subscription_id, args.limit)
    rows: list[Sequence[str]] = []
    for d in found:
        last = d.attempts[-1] if d.attempts else None
        rows.append((d.id, d.event.value, d.status.value, str(d.tries),
                     when(last.at) if last else "-",
                     str(last.status_code or "-") if last else "-",
                     (last.error or "") if last else ""))
    table(("WEBHOOK-ID", "EVENT", "STATUS", "TRIES", "LAST", "CODE", "ERROR"), rows)


def _redeliver(admin: Administration, args: argparse.Namespace) -> None:
    delivery = admin.webhooks.redeliver(_operator(admin, args), args.delivery_id)
    note(args, f"{delivery.id} is pending again; a worker sends it at once")


WEBHOOK_COMMANDS = {
    ("webhook", "create"): _create,
    ("webhook", "list"): _list,
    ("webhook", "enable"): _enable,
    ("webhook", "disable"): _disable,
    ("webhook", "rotate-secret"): _rotate,
    ("webhook", "delete"): _delete,
    ("webhook", "deliveries"): _deliveries,
    ("webhook", "redeliver"): _redeliver,
}
"""The commands by (kind, verb), for ``admin_cli._COMMANDS``."""
