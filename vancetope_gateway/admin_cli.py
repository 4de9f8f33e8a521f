"""``vancetope admin …``: tenants, projects, users, API tokens, recipes, settings, the
delivery log, dead letters, tool health, knowledge documents, the retention purge, the
audit log, and the export of the whole store and its import into another, on the
configured store. Each write command is recorded in the audit log (``admin_audit.py``).

Output is made to be scripted: the result (a new id, a token's secret, a
table whose first column is the id) goes to stdout, notes for people go to
stderr, and ``--quiet`` drops the notes. Errors are one line on stderr with
exit code 2 (``main`` maps ``VancetopeError``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vancetope_brain.errors import Conflict, InvalidInput, NotFound
from vancetope_gateway.admin_audit import AUDIT_PAGE, audited
from vancetope_gateway.admin_inspect import add_inspect, inspect
from vancetope_gateway.admin_schedules import (
    add_schedule,
    schedule_delete,
    schedule_list,
    schedule_pause,
    schedule_resume,
    schedule_show,
)
from vancetope_gateway.admin_text import note as _note
from vancetope_gateway.admin_text import table as _table
from vancetope_gateway.admin_text import when as _when
from vancetope_gateway.admin_webhooks import WEBHOOK_COMMANDS, add_webhook

if TYPE_CHECKING:  # the brain loads only when an admin command runs, not for every CLI start
    from vancetope_brain.config import Config
    from vancetope_brain.identity import Principal
    from vancetope_brain.models.settings import SettingScope
    from vancetope_brain.runtime import Administration

    _Command = Callable[[Administration, argparse.Namespace], None]


EXPORT_PAGE = 1000
"""``--page``'s default (``vancetope_brain.services.transfer.EXPORT_PAGE``, spelt out so the
parser loads no brain module)."""

ROLES = ("user", "operator", "platform")
"""A token's roles (``vancetope_brain.models.Role``, spelt out so the parser loads no brain
module)."""

DEFINITION_KINDS = ("strategy", "template")
"""Definition kinds besides recipes with ``list/show/put/delete`` commands (names from
``vancetope_brain.recipes.kinds``, spelt out so the parser loads no brain module)."""

_DESCRIPTION = (
    "Administer tenants, projects, users, API tokens, recipes and settings, and read the delivery "
    "log, dead letters, tool health, system sessions and the audit log, purge what retention "
    "lets go, export the whole store and import it into another, in the store named by VANCETOPE_STORE_URL (default: the SQLite file in VANCETOPE_DATA_DIR). Results go to "
    "stdout (a new id, a token's secret, a table whose first column is the id), notes to "
    "stderr; errors exit with code 2."
)


def add_admin_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    admin = sub.add_parser("admin", help="tenants, projects, users, tokens, recipes, settings, "
                           "deliveries, dead letters, tool health, system sessions, the audit "
                           "log, webhooks, schedules, export/import",
                           description=_DESCRIPTION)
    kinds = admin.add_subparsers(dest="admin_kind", required=True, metavar="KIND")
    quiet = argparse.ArgumentParser(add_help=False)
    quiet.add_argument("--quiet", "-q", action="store_true",
                       help="print only the result, no notes on stderr")
    exist_ok = argparse.ArgumentParser(add_help=False)
    exist_ok.add_argument("--exist-ok", action="store_true",
                          help="succeed (and print the id) if --id already exists here")

    def verbs(name: str, summary: str) -> argparse._SubParsersAction[argparse.ArgumentParser]:
        return kinds.add_parser(name, help=summary).add_subparsers(
            dest="admin_verb", required=True, metavar="VERB")

    kinds.add_parser(
        "migrate", parents=[quiet],
        help="bring the store's schema to this server's version and print it (every process "
             "also does this when it opens the store; run it once before a rolling upgrade)",
    ).set_defaults(admin_verb="")
    p = kinds.add_parser(
        "purge", parents=[quiet],
        help="delete now what the tenants' retention settings (retention.*) let go, in the "
             "housekeeping's bounded batches until nothing due is left; --dry-run shows it")
    p.add_argument("--dry-run", action="store_true",
                   help="delete nothing: per tenant and kind, how many records would go and "
                        "the oldest one's time")
    p.add_argument("--tenant", help="only this tenant (default: every tenant)")
    p.set_defaults(admin_verb="")
    p = kinds.add_parser(
        "export", parents=[quiet],
        help="write every record of the store (every tenant and kind, with the schema "
             "versions) to PATH (gzip if it ends in .gz; '-': stdout), to move the "
             "installation to another store with `import`; stop the gateways and workers "
             "first (docs/operations.md, 'Moving between stores')")
    p.add_argument("path", nargs="?", default="-", metavar="PATH|-",
                   help="the export file, mode 0600: it holds settings and token hashes "
                        "(default '-': stdout, to a pipe)")
    p.add_argument("--resume", action="store_true",
                   help="finish the interrupted export whose PATH.partial is there, from its "
                        "last checkpoint")
    p.add_argument("--page", type=int, default=EXPORT_PAGE, metavar="N",
                   help=f"records read per call, and per checkpoint (default {EXPORT_PAGE})")
    p.set_defaults(admin_verb="")
    p = kinds.add_parser(
        "import", parents=[quiet],
        help="write an export's records into the store (empty: a new database after `admin "
             "migrate`), checking each kind's count and digest, then read the store back "
             "and compare")
    p.add_argument("path", nargs="?", default="-", metavar="PATH|-",
                   help="the export file, gzip or not (default '-': stdin, from a pipe)")
    p.add_argument("--resume", action="store_true",
                   help="finish an interrupted import of this file: records already in the "
                        "store are skipped")
    p.set_defaults(admin_verb="")
    add_inspect(kinds)
    add_webhook(verbs, quiet)
    add_schedule(kinds, quiet)
    tenant = verbs("tenant", "tenants (each gets a project 'default')")
    p = tenant.add_parser("create", parents=[quiet, exist_ok], help="create a tenant")
    p.add_argument("name")
    p.add_argument("--id", help="tenant id (default: a random ten_… id)")
    tenant.add_parser("list", help="every tenant, oldest first")

    project = verbs("project", "projects of a tenant")
    p = project.add_parser("create", parents=[quiet, exist_ok], help="create a project")
    p.add_argument("--tenant", required=True)
    p.add_argument("name")
    p.add_argument("--id", help="project id, unique in the tenant (default: a random prj_… id)")
    p.add_argument("--group", help="group id the project belongs to")
    p = project.add_parser("list", help="the tenant's projects, oldest first")
    p.add_argument("--tenant", required=True)

    user = verbs("user", "users of a tenant")
    p = user.add_parser("create", parents=[quiet, exist_ok], help="create a user")
    p.add_argument("--tenant", required=True)
    p.add_argument("name")
    p.add_argument("--id", help="user id, unique across tenants (default: a random usr_… id)")
    p = user.add_parser("list", help="the tenant's users, oldest first")
    p.add_argument("--tenant", required=True)

    token = verbs("token", "API tokens of a user")
    p = token.add_parser("create", parents=[quiet],
                         help="create a token and print its secret (shown only this once)")
    p.add_argument("--tenant", required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--label", default="", help="a note to tell tokens apart")
    p.add_argument("--role", choices=ROLES, default="user",
                   help="user (default): the user's own doors; operator: also the /admin/ "
                        "API for this tenant; platform: the /admin/ API for every tenant")
    p = token.add_parser("list", help="the user's tokens (revoked ones too; never secrets)")
    p.add_argument("--tenant", required=True)
    p.add_argument("--user", required=True)
    p = token.add_parser("revoke", parents=[quiet], help="revoke a token at once")
    p.add_argument("--tenant", required=True)
    p.add_argument("token_id")

    level = argparse.ArgumentParser(add_help=False)
    level.add_argument("--tenant", required=True)
    level.add_argument("--project", help="the project's level (default: the tenant's)")
    recipe = verbs("recipe", "tenant and project recipes (over the bundled ones)")
    recipe.add_parser("list", parents=[level],
                      help="the effective catalogue: per name the innermost recipe, its source")
    p = recipe.add_parser("show", parents=[level], help="the effective recipe as YAML")
    p.add_argument("name")
    p = recipe.add_parser("put", parents=[level, quiet],
                          help="create or replace a recipe at this level from a YAML file")
    p.add_argument("file", type=Path)
    p = recipe.add_parser("delete", parents=[level, quiet],
                          help="delete the recipe at this level (outer ones show again)")
    p.add_argument("name")
    for kind in DEFINITION_KINDS:
        definitions = verbs(kind, f"tenant and project {kind} definitions (over the bundled "
                                  "ones)")
        definitions.add_parser("list", parents=[level],
                               help=f"the effective catalogue: per name the innermost {kind}")
        p = definitions.add_parser("show", parents=[level], help=f"the effective {kind} as YAML")
        p.add_argument("name")
        p = definitions.add_parser("put", parents=[level, quiet],
                                   help=f"create or replace a {kind} at this level from a YAML "
                                        "file (validated first)")
        p.add_argument("file", type=Path)
        p = definitions.add_parser("delete", parents=[level, quiet],
                                   help=f"delete the {kind} at this level (outer ones show again)")
        p.add_argument("name")

    delivery = verbs("delivery", "the notification delivery log (why was nobody told?)")
    p = delivery.add_parser("list", help="deliveries of an item or a user, oldest first")
    p.add_argument("--tenant", required=True)
    p.add_argument("--item", help="an inbox item id")
    p.add_argument("--user", help="a user id")

    dead = verbs("dead-letter", "messages set aside unprocessed (their turns never completed)")
    p = dead.add_parser("list", help="the tenant's dead letters, oldest first")
    p.add_argument("--tenant", required=True)
    p.add_argument("--process", help="only this process's")
    p = dead.add_parser("requeue", parents=[quiet],
                        help="put a dead letter back into its process's inbox (attempts reset); "
                             "the sweeper wakes the process")
    p.add_argument("--tenant", required=True)
    p.add_argument("message_id")

    health = verbs("tool-health", "MCP servers and tools known not to be UP (no record: UP)")
    p = health.add_parser("list", help="the tenant's records: state, cause, since, next probe")
    p.add_argument("--tenant", required=True)
    p.add_argument("--project", help="only this project's")
    p = health.add_parser("reset", parents=[quiet],
                          help="forget records (all of the tenant, or of --project / --server / "
                               "--tool): UP at once, the next turn lists and calls again")
    p.add_argument("--tenant", required=True)
    p.add_argument("--project", help="only this project's")
    p.add_argument("--server", help="only this server's (its own record and its tools')")
    p.add_argument("--tool", help="only this tool's record (needs --server), e.g. echo__add")

    system = verbs("system-session", "service engines' hidden sessions (agrajag's, …) and "
                                     "their processes")
    p = system.add_parser("list", help="every system session of the tenant with its processes, "
                                       "newest session first")
    p.add_argument("--tenant", required=True)
    p.add_argument("--project", help="only this project's")

    audit = verbs("audit", "the operators' audit log: every write of this CLI and of the "
                           "/admin/ API, with its outcome")
    p = audit.add_parser("list", help="the newest records first, a page at a time")
    p.add_argument("--tenant", help="only this tenant's (default: every tenant's)")
    p.add_argument("--limit", type=int, default=AUDIT_PAGE,
                   help=f"records per page (default {AUDIT_PAGE}, at most 500)")
    p.add_argument("--cursor", help="the page after the one whose last note printed it")

    docs = verbs("docs", "a project's knowledge documents (an add is indexed before it returns)")
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--tenant", required=True)
    where.add_argument("--project", default="default", help="the project (default: 'default')")
    p = docs.add_parser("add", parents=[where, quiet],
                        help="add files (a name already there is replaced) and index them")
    p.add_argument("files", nargs="+", type=Path, metavar="FILE")
    p.add_argument("--user", default="operator",
                   help="who added them, whose clients see the progress (default: operator)")
    docs.add_parser("list", parents=[where], help="the project's documents by name")
    p = docs.add_parser("rm", parents=[where, quiet],
                        help="delete documents (chunks and bytes) by name or id")
    p.add_argument("names", nargs="+", metavar="NAME|ID")

    setting = verbs("setting", "settings: user → project → tenant → default, innermost wins")
    cascade = argparse.ArgumentParser(add_help=False)
    cascade.add_argument("--tenant", required=True)
    cascade.add_argument("--project")
    cascade.add_argument("--user")
    p = setting.add_parser("get", parents=[cascade],
                           help="the resolved value (its source on stderr)")
    p.add_argument("key")
    setting.add_parser("list", parents=[cascade],
                       help="every key with its resolved value and source")
    for verb, summary in (("set", "store a value at one level"),
                          ("unset", "remove the value stored at one level")):
        p = setting.add_parser(verb, parents=[quiet], help=summary)
        p.add_argument("--tenant", required=True)
        one = p.add_mutually_exclusive_group()
        one.add_argument("--project", help="the project's level (default: the tenant's)")
        one.add_argument("--user", help="the user's level (applies in every project)")
        p.add_argument("key")
        if verb == "set":
            p.add_argument("value", help="parsed by the key's type (int, true/false, text)")


def run_admin(config: Config, args: argparse.Namespace) -> int:
    from vancetope_brain.runtime import Administration

    admin = Administration.open(config)
    try:
        with audited(admin.audit, args):
            _COMMANDS[(args.admin_kind, args.admin_verb)](admin, args)
    finally:
        admin.close()
    return 0


def _create(args: argparse.Namespace, create: Callable[[], Any], exists: Callable[[], bool],
            created: Callable[[Any], str], existed: str) -> None:
    """Run ``create`` and print the new id. With ``--exist-ok --id X``, a Conflict because X
    exists here is success too; any other Conflict is re-raised."""
    try:
        record = create()
    except Conflict:
        if not (args.exist_ok and args.id is not None and exists()):
            raise
        _note(args, existed)
        print(args.id)
        return
    _note(args, created(record))
    print(record.id)


def _migrate(admin: Administration, args: argparse.Namespace) -> None:
    # Opening the store (Administration.open) created or migrated it, under the store's lock.
    version = admin.store.schema_version()
    if version is None:
        _note(args, "this store keeps a schema version in each record and upgrades records "
                    "as it reads them: nothing to migrate")
        print("per-record")
    else:
        _note(args, f"the store's schema is at version {version}, this server's")
        print(version)


def _purge(admin: Administration, args: argparse.Namespace) -> None:
    from vancetope_brain.models import utcnow
    from vancetope_brain.services.retention import KINDS

    if args.tenant is not None:
        admin.identity.require_tenant(args.tenant)
    now = utcnow()
    if args.dry_run:
        rows: list[Sequence[str]] = []
        for tenant in admin.retention.due(now, args.tenant):
            for kind in KINDS:
                cutoff = tenant.before(kind)
                due = tenant.due[kind]
                rows.append((tenant.tenant_id, kind, "kept" if cutoff is None else str(due.count),
                             _when(due.oldest) if due.oldest else "-",
                             _when(cutoff) if cutoff else "-"))
        _table(("TENANT", "KIND", "DUE", "OLDEST", "BEFORE"), rows)
        _note(args, "dry run: nothing was deleted (kept: the tenant's retention setting for "
                    "this kind is unset)")
        return
    total = dict.fromkeys(KINDS, 0)

    def progress(tenant: str, gone: dict[str, int]) -> None:
        _note(args, f"{tenant}: deleted " + ", ".join(f"{n} {kind}" for kind, n in gone.items()
                                                     if n))

    while True:  # one housekeeping-sized run after another, until one deletes nothing
        run = admin.retention.purge(now, args.tenant, progress=progress)
        for kind, count in run.items():
            total[kind] += count
        if not any(run[kind] for kind in ("sessions", "deliveries", "audit", "inspections")):
            break
    _table(("KIND", "DELETED"), [(kind, str(total[kind])) for kind in KINDS])


def _export(admin: Administration, args: argparse.Namespace) -> None:
    from vancetope_brain.services.transfer import export_store, source_of

    if args.path == "-" and sys.stdout.isatty():
        raise InvalidInput("give the export a PATH (or pipe it: vancetope admin export - | …); "
                           "it is not for a terminal")
    done = export_store(admin.transfer, source_of(admin.store), args.path,
                        page=args.page, resume=args.resume, notes=lambda text: _note(args, text))
    summary = done.summary
    line = (f"{'complete already' if done.already_complete else 'exported'}: "
            f"{summary.count} records of {len(summary.kinds)} kinds"
            f"{'' if args.path == '-' else ' in ' + args.path} (digest {summary.digest})")
    if args.path == "-":
        _note(args, line)
    else:
        print(line)


def _import(admin: Administration, args: argparse.Namespace) -> None:
    from vancetope_brain.services.transfer import import_store

    if args.path == "-" and sys.stdin.isatty():
        raise InvalidInput("give the export's PATH (or pipe it in: … | vancetope admin import -)")
    done = import_store(admin.transfer, args.path, resume=args.resume,
                        notes=lambda text: _note(args, text))
    summary = done.summary
    if done.differences:
        raise Conflict("after the import the store differs from the file in "
                       f"{'; '.join(done.differences)}: it held other records before (import "
                       "into an empty store) — do not start the server on it")
    print(f"verified: the store holds the file's {summary.count} records of "
          f"{len(summary.kinds)} kinds (digest {summary.digest})")


def _tenant_create(admin: Administration, args: argparse.Namespace) -> None:
    _create(args, lambda: admin.identity.create_tenant(args.name, args.id),
            lambda: any(t.id == args.id for t in admin.identity.list_tenants()),
            lambda t: f"created tenant {t.id} ({t.name}) with project default",
            f"tenant {args.id} exists")


def _tenant_list(admin: Administration, args: argparse.Namespace) -> None:
    _table(("ID", "NAME", "CREATED"),
           [(t.id, t.name, _when(t.created_at)) for t in admin.identity.list_tenants()])


def _project_create(admin: Administration, args: argparse.Namespace) -> None:
    _create(args, lambda: admin.identity.create_project(args.tenant, args.name, args.id, args.group),
            lambda: any(p.id == args.id for p in admin.identity.list_projects(args.tenant)),
            lambda p: f"created project {p.id} ({p.name}) in tenant {args.tenant}",
            f"project {args.id} exists in tenant {args.tenant}")


def _project_list(admin: Administration, args: argparse.Namespace) -> None:
    _table(("ID", "NAME", "GROUP", "CREATED"),
           [(p.id, p.name, p.group_id or "-", _when(p.created_at))
            for p in admin.identity.list_projects(args.tenant)])


def _user_create(admin: Administration, args: argparse.Namespace) -> None:
    _create(args, lambda: admin.identity.create_user(args.tenant, args.name, args.id),
            lambda: any(u.id == args.id for u in admin.identity.list_users(args.tenant)),
            lambda u: f"created user {u.id} ({u.name}) in tenant {args.tenant}",
            f"user {args.id} exists in tenant {args.tenant}")


def _user_list(admin: Administration, args: argparse.Namespace) -> None:
    _table(("ID", "NAME", "CREATED"),
           [(u.id, u.name, _when(u.created_at)) for u in admin.identity.list_users(args.tenant)])


def _token_create(admin: Administration, args: argparse.Namespace) -> None:
    token, secret = admin.identity.create_token(args.tenant, args.user, args.label, args.role)
    print(secret, flush=True)
    _note(args, f"token id: {token.id} ({token.role} token of user {args.user}, tenant "
                f"{args.tenant}). The secret above "
                "is shown only now. Revoke with: vancetope admin token revoke "
                f"--tenant {args.tenant} {token.id}")


def _token_list(admin: Administration, args: argparse.Namespace) -> None:
    _table(("ID", "ROLE", "LABEL", "CREATED", "REVOKED"),
           [(t.id, t.role.value, t.label or "-", _when(t.created_at),
             "yes" if t.revoked else "no")
            for t in admin.identity.list_tokens(args.tenant, args.user)])


def _token_revoke(admin: Administration, args: argparse.Namespace) -> None:
    admin.identity.revoke_token(args.tenant, args.token_id)
    _note(args, f"revoked token {args.token_id}")


def _delivery_list(admin: Administration, args: argparse.Namespace) -> None:
    admin.identity.require_tenant(args.tenant)
    _table(("ID", "ITEM", "USER", "CHANNEL", "STATUS", "CREATED", "REASON"),
           [(d.id, d.item_id, d.user_id, d.channel, d.status.value, _when(d.created_at),
             d.reason or "-")
            for d in admin.deliveries.list_deliveries(args.tenant, item_id=args.item,
                                                               user_id=args.user)])


def _dead_letter_list(admin: Administration, args: argparse.Namespace) -> None:
    admin.identity.require_tenant(args.tenant)
    rows: list[Sequence[str]] = []
    for m in admin.dead_letters.dead_letters(args.tenant, args.process, limit=1000):
        content = getattr(m.message, "content", None) or json.dumps(m.message.dump())
        rows.append((m.id, m.target_process_id, m.message.kind,
                     str(m.dead_letter.attempts) if m.dead_letter else "-",
                     _when(m.dead_letter.at) if m.dead_letter else "-", _short(content, 40)))
    _table(("ID", "PROCESS", "KIND", "ATTEMPTS", "SET_ASIDE", "CONTENT"), rows)


def _dead_letter_requeue(admin: Administration, args: argparse.Namespace) -> None:
    admin.identity.require_tenant(args.tenant)
    message = admin.dead_letters.requeue_dead_letter(args.tenant, args.message_id)
    _note(args, f"requeued {message.id} into process {message.target_process_id}; the sweeper "
                "wakes it within VANCETOPE_SWEEP_INTERVAL (unless it is PAUSED or SUSPENDED)")
    print(message.id)


def _tool_health_list(admin: Administration, args: argparse.Namespace) -> None:
    admin.identity.require_tenant(args.tenant)
    _table(("PROJECT", "SERVER", "TOOL", "STATE", "CAUSE", "SINCE", "NEXT_PROBE", "FAILURES",
            "SOURCE", "REASON"),
           [(r.project_id, r.server, r.tool or "-", r.state.value,
             r.cause.value if r.cause else "-", _when(r.since),
             _when(r.next_probe_at) if r.next_probe_at else "-", str(r.failures),
             r.source.value, _short(r.reason, 60) or "-")
            for r in admin.tool_health.store.list_tool_health(args.tenant, args.project)])


def _tool_health_reset(admin: Administration, args: argparse.Namespace) -> None:
    admin.identity.require_tenant(args.tenant)
    if args.tool is not None and args.server is None:
        from vancetope_brain.errors import InvalidInput

        raise InvalidInput("--tool needs --server (the tool's MCP server)")
    count = admin.tool_health.reset(args.tenant, args.project, args.server, args.tool)
    _note(args, f"reset {count} tool-health record(s); those servers and tools count as UP now")
    print(count)


def _system_session_list(admin: Administration, args: argparse.Namespace) -> None:
    from vancetope_brain.services import system_sessions

    admin.identity.require_tenant(args.tenant)
    rows: list[Sequence[str]] = []
    for session in system_sessions(admin.sessions, args.tenant):
        if args.project not in (None, session.project_id):
            continue
        processes = admin.sessions.list_processes(args.tenant, session.id)
        rows += [(session.id, session.project_id, session.title, session.status.value,
                  p.id, p.name, p.status.value + (f"/{p.close_reason.value}"
                                                  if p.close_reason else ""),
                  p.originating_user_id or "-", _when(p.created_at))
                 for p in processes] or [(session.id, session.project_id, session.title,
                                          session.status.value, "-", "-", "-", "-", "-")]
    _table(("SESSION", "PROJECT", "SERVICE", "SESSION_STATUS", "PROCESS", "NAME", "STATUS",
            "FOR_USER", "CREATED"), rows)


def _recipe_list(admin: Administration, args: argparse.Namespace) -> None:
    admin.identity.require_tenant(args.tenant)
    _table(("NAME", "ENGINE", "CATEGORY", "SOURCE", "DESCRIPTION"),
           [(e.recipe.name, e.recipe.engine, e.recipe.category.value, e.source.value,
             _short(e.recipe.description))
            for e in admin.recipes.list(args.tenant, args.project)])


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _recipe_show(admin: Administration, args: argparse.Namespace) -> None:
    from vancetope_brain.recipes import dump_recipe

    admin.identity.require_tenant(args.tenant)
    entry = admin.recipes.get(args.tenant, args.project, args.name)
    print(dump_recipe(entry.recipe), end="")
    hidden = f" (overrides {', '.join(s.value for s in entry.shadows)})" if entry.shadows else ""
    _note(args, f"source: {entry.source.value}{hidden}")


def _recipe_put(admin: Administration, args: argparse.Namespace) -> None:
    from vancetope_brain.errors import InvalidInput
    from vancetope_brain.recipes import parse_recipe

    admin.identity.require_tenant(args.tenant)
    try:
        text = args.file.read_text(encoding="utf-8")
    except OSError as e:
        raise InvalidInput(f"cannot read {args.file}: {e.strerror}") from e
    recipe = parse_recipe(text, str(args.file))
    created = admin.recipe_admin.put(args.tenant, args.project, recipe)
    _note(args, f"{'created' if created else 'replaced'} recipe {recipe.name} "
                f"(engine {recipe.engine}) in {_level(args)}")
    print(recipe.name)


def _recipe_delete(admin: Administration, args: argparse.Namespace) -> None:
    admin.identity.require_tenant(args.tenant)
    admin.recipe_admin.delete(args.tenant, args.project, args.name)
    _note(args, f"deleted recipe {args.name} from {_level(args)}")


def _definition_list(admin: Administration, args: argparse.Namespace) -> None:
    from vancetope_brain.recipes.kinds import kind_named

    admin.identity.require_tenant(args.tenant)
    kind = kind_named(args.admin_kind)
    _table(("NAME", "SOURCE", "DESCRIPTION"),
           [(e.definition.name, e.source.value, _short(getattr(e.definition, "description", "")))
            for e in admin.recipes.of(kind.model).list(args.tenant, args.project)])


def _definition_show(admin: Administration, args: argparse.Namespace) -> None:
    from vancetope_brain.recipes.kinds import kind_named
    from vancetope_brain.recipes.loader import dump_definition

    admin.identity.require_tenant(args.tenant)
    kind = kind_named(args.admin_kind)
    entry = admin.recipes.of(kind.model).get(args.tenant, args.project, args.name)
    print(dump_definition(entry.definition, kind.lead), end="")
    hidden = f" (overrides {', '.join(s.value for s in entry.shadows)})" if entry.shadows else ""
    _note(args, f"source: {entry.source.value}{hidden}")


def _definition_put(admin: Administration, args: argparse.Namespace) -> None:
    from vancetope_brain.errors import InvalidInput
    from vancetope_brain.recipes.kinds import kind_named
    from vancetope_brain.recipes.loader import parse_definition

    admin.identity.require_tenant(args.tenant)
    kind = kind_named(args.admin_kind)
    try:
        text = args.file.read_text(encoding="utf-8")
    except OSError as e:
        raise InvalidInput(f"cannot read {args.file}: {e.strerror}") from e
    definition = parse_definition(kind.model, text, str(args.file))
    created = admin.recipe_admin.of(kind.model).put(args.tenant, args.project, definition)
    _note(args, f"{'created' if created else 'replaced'} {kind.name} {definition.name} in "
                f"{_level(args)}")
    print(definition.name)


def _definition_delete(admin: Administration, args: argparse.Namespace) -> None:
    from vancetope_brain.recipes.kinds import kind_named

    admin.identity.require_tenant(args.tenant)
    kind = kind_named(args.admin_kind)
    admin.recipe_admin.of(kind.model).delete(args.tenant, args.project, args.name)
    _note(args, f"deleted {kind.name} {args.name} from {_level(args)}")


def _level(args: argparse.Namespace) -> str:
    if getattr(args, "user", None):
        return f"user {args.user} of tenant {args.tenant}"
    if args.project:
        return f"project {args.project} of tenant {args.tenant}"
    return f"tenant {args.tenant}"


def _scope(args: argparse.Namespace) -> SettingScope:
    from vancetope_brain.models.settings import SettingScope

    if args.user:
        return SettingScope.user(args.user)
    return SettingScope.project(args.project) if args.project else SettingScope.tenant()


def _shown(value: Any) -> str:
    """A value as typed on the command line: text as is, true/false, numbers."""
    return value if isinstance(value, str) else "-" if value is None else json.dumps(value)


def _source(scope: SettingScope | None) -> str:
    return "default" if scope is None else str(scope)


def _as(admin: Administration, args: argparse.Namespace) -> Principal:
    """Who a ``docs`` command acts as: ``--user`` of the tenant (an add), else ``operator``."""
    from vancetope_brain.identity import Principal

    admin.identity.require_tenant(args.tenant)
    return Principal(args.tenant, getattr(args, "user", "operator"))


def _docs_add(admin: Administration, args: argparse.Namespace) -> None:
    who = _as(admin, args)
    failed = []
    for path in args.files:
        try:
            data = path.read_bytes()
        except OSError as e:
            raise InvalidInput(f"cannot read {path}: {e.strerror}") from e
        doc, changed = admin.documents.add(who, args.project, path.name, data)
        doc = admin.documents.get(who, args.project, doc.id)
        if doc.error_code:
            failed.append(f"{path.name}: FAILED ({doc.error_code}): {doc.error}")
        else:
            _note(args, f"{path.name}: {'unchanged, ' if not changed else ''}"
                        f"{doc.status.value}, {doc.chunk_count} "
                        f"chunk{'' if doc.chunk_count == 1 else 's'}")
        print(doc.id)
    if failed:
        raise InvalidInput("; ".join(failed))


def _docs_list(admin: Administration, args: argparse.Namespace) -> None:
    docs = admin.documents.list(_as(admin, args), args.project)
    _table(("ID", "STATUS", "BYTES", "CHUNKS", "VERSION", "UPDATED", "NAME"),
           [(d.id, d.status.value, str(d.size), str(d.chunk_count), str(d.version),
             _when(d.updated_at), d.name) for d in docs])


def _docs_rm(admin: Administration, args: argparse.Namespace) -> None:
    operator = _as(admin, args)
    docs = admin.documents.list(operator, args.project)
    for wanted in args.names:
        found = [d for d in docs if wanted in (d.id, d.name)]
        if not found:
            raise NotFound(f"no document named {wanted!r} in project {args.project}")
        admin.documents.delete(operator, args.project, found[0].id)
        _note(args, f"deleted {found[0].name} ({found[0].id})")


def _audit_list(admin: Administration, args: argparse.Namespace) -> None:
    if args.tenant is not None:
        admin.identity.require_tenant(args.tenant)
    page = admin.audit.page(args.tenant, args.cursor, args.limit)
    _table(("ID", "AT", "TENANT", "ACTOR", "ACTION", "OUTCOME", "TARGET"),
           [(r.id, _when(r.at), r.tenant_id or "-", r.actor.replace(" ", ":"), r.action,
             r.outcome, r.target or "-") for r in page.records])
    if page.next_cursor is not None:
        _note(args, f"more: --cursor {page.next_cursor}")


def _setting_get(admin: Administration, args: argparse.Namespace) -> None:
    admin.identity.require_tenant(args.tenant)
    value, scope = admin.settings.resolve_with_source(args.tenant, args.project,
                                                              args.user, args.key)
    if value is not None:
        print(_shown(value))
    _note(args, f"{args.key}: from {_source(scope)}" + (" (unset)" if value is None else ""))


def _setting_list(admin: Administration, args: argparse.Namespace) -> None:
    admin.identity.require_tenant(args.tenant)
    effective = admin.settings.effective(args.tenant, args.project, args.user)
    _table(("KEY", "VALUE", "SOURCE"),
           [(key, _shown(value), _source(scope).replace(" ", ":"))
            for key, (value, scope) in effective.items()])


def _setting_set(admin: Administration, args: argparse.Namespace) -> None:
    from vancetope_brain.settings import setting_key

    admin.identity.require_tenant(args.tenant)
    value = admin.settings.set(args.tenant, _scope(args), args.key,
                                       setting_key(args.key).parse(args.value))
    _note(args, f"set {args.key} = {_shown(value)} for {_level(args)}")


def _setting_unset(admin: Administration, args: argparse.Namespace) -> None:
    admin.identity.require_tenant(args.tenant)
    admin.settings.unset(args.tenant, _scope(args), args.key)
    _note(args, f"unset {args.key} for {_level(args)}")


_COMMANDS: dict[tuple[str, str], _Command] = {
    ("migrate", ""): _migrate,
    ("purge", ""): _purge,
    ("inspect", ""): inspect,
    ("export", ""): _export,
    ("import", ""): _import,
    ("system-session", "list"): _system_session_list,
    ("tenant", "create"): _tenant_create,
    ("tenant", "list"): _tenant_list,
    ("project", "create"): _project_create,
    ("project", "list"): _project_list,
    ("user", "create"): _user_create,
    ("user", "list"): _user_list,
    ("token", "create"): _token_create,
    ("token", "list"): _token_list,
    ("token", "revoke"): _token_revoke,
    ("recipe", "list"): _recipe_list,
    ("recipe", "show"): _recipe_show,
    ("recipe", "put"): _recipe_put,
    ("recipe", "delete"): _recipe_delete,
    **{(kind, verb): command for kind in DEFINITION_KINDS for verb, command in (
        ("list", _definition_list), ("show", _definition_show), ("put", _definition_put),
        ("delete", _definition_delete))},
    ("delivery", "list"): _delivery_list,
    ("dead-letter", "list"): _dead_letter_list,
    ("dead-letter", "requeue"): _dead_letter_requeue,
    ("tool-health", "list"): _tool_health_list,
    ("tool-health", "reset"): _tool_health_reset,
    ("docs", "add"): _docs_add,
    ("docs", "list"): _docs_list,
    ("docs", "rm"): _docs_rm,
    ("setting", "get"): _setting_get,
    ("setting", "list"): _setting_list,
    ("setting", "set"): _setting_set,
    ("setting", "unset"): _setting_unset,
    ("audit", "list"): _audit_list,
    **WEBHOOK_COMMANDS,
    ("schedule", "list"): schedule_list,
    ("schedule", "show"): schedule_show,
    ("schedule", "pause"): schedule_pause,
    ("schedule", "resume"): schedule_resume,
    ("schedule", "delete"): schedule_delete,
}
