"""``vancetope admin inspect PROCESS [TURN]``: the inspector's turn records of a process of a
tenant, as an operator on a host reads them (issue 32, part 2; ``/admin/`` has the same for a
running system). A list is a table, newest first; a turn is its steps as text (``--json``:
the record)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from vancetope_brain.errors import InvalidInput, NotFound
from vancetope_brain.models.inspector import InspectedMessage, ToolStep, TurnInspection
from vancetope_gateway.admin_text import note, table, when

if TYPE_CHECKING:
    from vancetope_brain.runtime import Administration

INSPECT_PAGE = 20
"""Turns ``vancetope admin inspect PROCESS`` lists by default."""
INSPECT_PAGE_MAX = 100
"""The most it lists at once."""


def add_inspect(kinds: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``inspect`` command of ``vancetope admin``."""
    p = kinds.add_parser(
        "inspect",
        help="the inspector: a process's turns, newest first; with TURN, that turn's model "
             "input and output, tool calls, tokens and timings (texts cut to the record's "
             "caps, secrets redacted)")
    p.add_argument("process", metavar="PROCESS", help="a process id of the tenant")
    p.add_argument("turn", nargs="?", metavar="TURN", help="a turn id of the process")
    p.add_argument("--tenant", required=True)
    p.add_argument("--limit", type=int, default=INSPECT_PAGE,
                   help=f"turns listed (default {INSPECT_PAGE}, at most {INSPECT_PAGE_MAX})")
    p.add_argument("--cursor", help="the page after the one whose last note printed it")
    p.add_argument("--json", action="store_true", help="the turn's record as JSON")
    p.set_defaults(admin_verb="")


def inspect(admin: Administration, args: argparse.Namespace) -> None:
    """``vancetope admin inspect PROCESS [TURN]``."""
    admin.identity.require_tenant(args.tenant)
    admin.sessions.get_process(args.tenant, args.process)  # NotFound: not the tenant's
    if args.turn is None:
        if not 1 <= args.limit <= INSPECT_PAGE_MAX:
            raise InvalidInput(f"--limit must be 1 to {INSPECT_PAGE_MAX}")
        turns, cursor = admin.inspections.page(args.tenant, args.process, args.cursor,
                                               args.limit)
        table(("TURN", "STARTED", "LIFECYCLE", "PROFILE", "MODEL", "STEPS", "IN", "OUT", "MS",
                "STATUS"),
               [(t.id, when(t.started_at), t.lifecycle, t.profile or "-", t.model or "-",
                 str(t.step_count), str(t.tokens_in), str(t.tokens_out),
                 str(round((t.ended_at - t.started_at).total_seconds() * 1000)),
                 t.status_after.value) for t in turns])
        if cursor is not None:
            note(args, f"more: --cursor {cursor}")
        return
    record = admin.inspections.get(args.tenant, args.turn)
    if record.process_id != args.process:
        raise NotFound(f"turn {args.turn} not found in process {args.process}")
    if args.json:
        print(json.dumps(record.dump(), indent=2, ensure_ascii=False))
        return
    print("\n".join(_inspected_lines(record)))


def _inspected_lines(record: TurnInspection) -> list[str]:
    """A turn's record as text: its head, then each step with what it was given and gave."""
    lines = [f"turn {record.id} of process {record.process_id} (session {record.session_id}, "
             f"user {record.user_id})",
             f"{record.lifecycle} by {record.engine}, epoch {record.epoch}, "
             f"{when(record.started_at)}, "
             f"{round((record.ended_at - record.started_at).total_seconds() * 1000)} ms, "
             f"then {record.status_after.value}",
             f"profile {record.profile or '-'}, model {record.model or '-'}, tokens in "
             f"{record.tokens_in} out {record.tokens_out}"
             + (f"; {record.cut_chars} characters cut" if record.cut_chars else "")
             + (f"; {record.dropped_steps} steps dropped" if record.dropped_steps else "")]
    if record.chat_ids:
        lines.append(f"chat lines: {', '.join(record.chat_ids)}")
    for n, step in enumerate(record.steps, 1):
        lines.append("")
        if isinstance(step, ToolStep):
            lines.append(f"[{n}] tool {step.name} at +{step.at_ms} ms, {step.duration_ms} ms: "
                         f"{step.outcome}")
            lines.append(f"    arguments: {step.arguments}")
            lines.append(f"    result: {step.result}")
            continue
        lines.append(f"[{n}] model {step.model} at +{step.at_ms} ms, {step.duration_ms} ms, "
                     f"tokens in {step.tokens_in} out {step.tokens_out} "
                     f"({step.usage_source.value}), finish {step.finish_reason}")
        if step.tools:
            lines.append(f"    tools offered: {', '.join(step.tools)}")
        if step.shared:
            lines.append(f"    input: the previous model step's first {step.shared} messages, "
                         "then:")
        lead = next((i for i, m in enumerate(step.messages) if m.role != "system"),
                    len(step.messages))
        for i, message in enumerate(step.messages):
            if i == lead and step.omitted:
                lines.append(f"    … {step.omitted} earlier messages not kept in the record")
            lines.extend(_message_lines(message))
        lines.append("    output:")
        lines.extend(_message_lines(step.output))
    return lines


def _message_lines(message: InspectedMessage) -> list[str]:
    head = f"    {message.role}" + (f" (to call {message.tool_call_id})"
                                    if message.tool_call_id else "") + ":"
    lines = [head] + [f"      {line}" for line in message.content.splitlines()]
    lines += [f"      → call {c.name} {c.arguments} (id {c.id})" for c in message.tool_calls]
    return lines
