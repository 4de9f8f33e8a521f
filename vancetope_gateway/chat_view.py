"""What ``vancetope chat`` shows: frames become transcript lines and a live preview.

The transcript is the committed chat, in its order: a turn's lines (the user's or a
worker's line that started it, its tool lines, the reply) are printed when they arrive,
each tool call and worker report as one short line (``/details`` shows the last one in
full). Streamed tokens only feed the preview of the reply in progress, which
``stream-reset`` and ``turn-restarted`` clear and the committed reply replaces
(docs/protocol.md "Showing a streamed reply"), so an attempt sent back is never shown as
the answer and nothing is printed out of order.
"""

from __future__ import annotations

import io
import json
import queue
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol
from xml.sax.saxutils import unescape

from rich.console import Console
from rich.markdown import Markdown
from rich.text import Text

SHORT = 100
"""Characters of a summary, argument or result shown on a tool or worker line."""
_ATTR = re.compile(r"""(\w+)=("[^"]*"|'[^']*')""")  # as quoteattr writes them
_TAG = re.compile(r"""<([a-z-]+)((?:\s+\w+=(?:"[^"]*"|'[^']*'))*)>(.*?)</\1>""", re.DOTALL)
_ENTITIES = {"&quot;": '"', "&apos;": "'"}
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Control characters but newline and tab: an escape sequence in a worker's text would
drive the terminal (clear it, retitle it, fake a prompt), so none reaches it."""


class View(Protocol):
    """Where the printer's output goes: a plain stream or the interactive terminal. Neither
    reads a line as terminal markup, and neither lets a control character through
    (``printable``): the text is a worker's or a model's."""

    def line(self, kind: str, text: str) -> None:
        """Print one transcript line. ``kind``: a chat role (``assistant``, ``user``,
        ``error``), ``tool``, ``event``, ``source`` (a document passage the reply before it
        used), ``inbox`` (a new item), ``inbox-update`` (what happened to one), ``note`` (the client's own remark), ``help``, ``details`` (a
        Markdown text, ``chat_details``) or ``link`` (an address to open)."""

    def preview(self, text: str) -> None:
        """Show ``text`` as the reply streaming in ("" clears it)."""


def printable(text: str) -> str:
    """``text`` with every control character but newline and tab shown as its escape
    (``\\x1b``), inert."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


class PlainView:
    """Lines as ``who> text`` on a plain stream (a pipe, a test): no styles, no preview (only
    committed lines, so a script reads each reply once, whole); every line of a message of
    several lines carries its prefix, so ``grep '^assistant>'`` finds all of a reply."""

    def __init__(self, out: Any) -> None:
        self.out = out

    def line(self, kind: str, text: str) -> None:
        prefix = {"user": "you> ", "assistant": "assistant> ", "error": "error> ",
                  "inbox": "(inbox) ", "inbox-update": "(inbox) ", "tool": "", "event": "",
                  "note": "", "help": "", "details": "", "link": ""}.get(kind, f"{kind}> ")
        text = printable(f"({text})" if kind == "note" else text)
        lines = (text.splitlines() or [""]) if prefix else [text]
        print("\n".join(f"{prefix}{part}".rstrip() for part in lines), file=self.out,
              flush=True)

    def preview(self, text: str) -> None:
        pass


class TerminalView:
    """The interactive terminal: styled lines through ``console`` (printed above the prompt
    while the user types), Markdown for replies; the preview is kept for the prompt to draw
    (``rendered_preview``), and ``on_preview`` asks it to redraw. Text goes to rich as
    ``Text`` or ``Markdown``, never as a string rich would parse for ``[style]`` markup."""

    _STYLES = {"user": "bold green", "tool": "yellow", "event": "magenta", "inbox": "bold blue",
               "inbox-update": "blue", "note": "dim", "error": "bold red"}

    def __init__(self, console: Console, on_preview: Callable[[], None]) -> None:
        self.console, self.on_preview = console, on_preview
        self.streaming = ""
        self._rendered: tuple[tuple[str, int, int], str] = (("", 0, 0), "")

    def line(self, kind: str, text: str) -> None:
        text = printable(text)
        if kind == "assistant":
            self.console.print(Text("assistant ▸", style="bold cyan"))
            self.console.print(Markdown(text))
        elif kind == "details":
            self.console.print(Markdown(text))
        elif kind == "link":  # not wrapped by rich, so the terminal sees one address
            self.console.print(Text(text, style="underline"), soft_wrap=True)
        elif kind == "user":
            self.console.print(Text("you> ", style="bold green") + Text(text))
        elif kind == "inbox":
            self.console.print(Text(f"✉ inbox: {text}", style=self._STYLES[kind]))
        elif kind == "inbox-update":
            self.console.print(Text(f"✉ {text}", style=self._STYLES[kind]))
        elif kind == "note":
            self.console.print(Text(f"({text})", style=self._STYLES[kind]))
        elif kind == "error":
            self.console.print(Text(f"error: {text}", style=self._STYLES[kind]))
        elif kind == "source":
            self.console.print(Text(f"  source: {text}", style="dim"))
        else:
            self.console.print(Text(text, style=self._STYLES.get(kind, "")))

    def preview(self, text: str) -> None:
        self.streaming = text
        self.on_preview()

    def rendered_preview(self, width: int, lines: int) -> str:
        """The reply streaming in as the transcript will show it (Markdown rendered, not
        its raw ``**`` and ``- ``), ``width`` columns wide: its last ``lines`` lines, with
        ANSI styles, for the prompt to draw above the input."""
        key = (self.streaming, width, lines)
        if self._rendered[0] != key:
            console = Console(file=io.StringIO(), width=width, force_terminal=True,
                              color_system=self.console.color_system)  # type: ignore[arg-type]
            with console.capture() as captured:
                console.print(Text("assistant ▸", style="bold cyan"))
                console.print(Markdown(printable(_closed(self.streaming))))
            self._rendered = (key, "\n".join(captured.get().rstrip("\n").split("\n")[-lines:]))
        return self._rendered[1]


def _closed(partial: str) -> str:
    """A reply cut mid-stream with the marks it opened last closed — a code fence, else the
    current paragraph's inline code or ``**``/``__`` — so that ``**Gather the fa`` previews
    bold, not as ``**``."""
    if (partial.count("\n```") + partial.startswith("```")) % 2:
        return partial + "\n```"
    paragraph = partial.rsplit("\n\n", 1)[-1]
    if paragraph.count("`") % 2:
        return partial.rstrip() + "`"
    for mark in ("**", "__"):
        if paragraph.count(mark) % 2:
            # A closing mark follows a word, not a space; a mark with nothing after it yet
            # waits for its word.
            partial = partial.rstrip()
            partial = partial[:-len(mark)] if partial.endswith(mark) else partial + mark
    return partial


def _short(text: str, limit: int = SHORT) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def size_text(size: Any) -> str:
    size = int(size)
    return f"{size} B" if size < 1024 else f"{size / 1024:.1f} KiB"


def _first_line(text: str) -> str:
    """The first non-empty line, without Markdown's emphasis and heading marks (a report
    starts with its heading)."""
    first = next((part for part in text.strip().splitlines() if part.strip()), "")
    return _short(_HEADING.sub("", first).replace("**", "").replace("__", ""))


def tool_parts(line: dict[str, Any]) -> tuple[str, str, Any, Any]:
    """A ``tool`` chat line (``name(args) → status: {"result"|"error": …}``) taken apart:
    name, status, arguments, body (None where it does not parse, e.g. a cut result)."""
    meta = line.get("meta") or {}
    content = line["content"]
    name = meta.get("toolName") or content.split("(", 1)[0]
    status = str(meta.get("status") or "")
    args: Any = None
    if content.startswith(f"{name}("):
        try:
            args, _ = json.JSONDecoder().raw_decode(content, len(name) + 1)
        except ValueError:
            args = None
    body: Any = None
    _, sep, rest = content.partition(f" → {status}: ") if status else ("", "", "")
    if sep:
        try:
            body = json.loads(rest)
        except ValueError:
            body = None
    return name, status, args, body


def tool_line(line: dict[str, Any]) -> str:
    """A ``tool`` chat line as one short line: ``⚙ process_create demo-research (marvin) →
    STARTING``."""
    name, status, args, body = tool_parts(line)
    shown = f"⚙ {name}"
    if isinstance(args, dict):
        if name == "process_create":
            what = args.get("name") or _short(str(args.get("goal", "")), 40)
            shown += f" {what} ({args.get('recipe') or args.get('engine') or '?'})"
        elif name == "inbox_post":
            shown += f" {args.get('type', '?')} “{_short(str(args.get('title', '')), 50)}”"
            file = args.get("attachment")
            if isinstance(file, dict) and "size_bytes" in file:  # stored: its reference
                shown += (f" + {file.get('filename')} ({file.get('mime_type')}, "
                          f"{size_text(file['size_bytes'])})")
        elif args:
            shown += " " + _short(", ".join(f"{k}={v}" for k, v in args.items()
                                            if not isinstance(v, (dict, list))), 60)
    if isinstance(body, dict) and "error" in body:
        return f"{shown} → error: {_short(str(body['error']))}"
    result = body.get("result") if isinstance(body, dict) else None
    if isinstance(result, dict) and isinstance(result.get("status"), str):
        return f"{shown} → {result['status']}"
    return f"{shown} → {status or '?'}"


@dataclass(frozen=True)
class Tagged:
    """An ``event`` chat line (``vancetope_brain.engines.prompting.event_text``) taken apart,
    unescaped: its tag, its attributes, its text and (a ``process-event``'s) payload."""

    tag: str
    attrs: dict[str, str]
    text: str
    payload: str = ""


def tagged(content: str) -> Tagged | None:
    """``content`` taken apart, None when it is no tagged event line."""
    match = _TAG.fullmatch(content.strip())
    if match is None:
        return None
    tag, attrs, body = match.groups()
    # Split before unescaping: an escaped "<payload>" in the summary is text.
    text, _, payload = body.partition("<payload>") if tag == "process-event" else (body, "", "")
    return Tagged(tag, {k: unescape(v[1:-1], _ENTITIES) for k, v in _ATTR.findall(attrs)},
                  unescape(text), unescape(payload.removesuffix("</payload>")))


def event_line(content: str, names: dict[str, str]) -> str:
    """An ``event`` chat line (what a worker, an Inbox answer or a tool result told Arthur)
    as one short line: ``◆ worker demo-research DONE: <first line>``; ``names``: process
    id → name."""
    event = tagged(content)
    if event is None:
        return _first_line(content)
    values = event.attrs
    if event.tag == "process-event":
        source = values.get("sourceProcessId", "?")
        who = values.get("sourceName") or names.get(source, source)
        first = _first_line(event.text)
        return f"◆ worker {who} {values.get('type', '?').upper()}" + \
            (f": {first}" if first else "")
    if event.tag == "inbox-answer":
        answer = inbox_answer(event.text)
        said = answer_text(answer) if answer else _first_line(event.text)
        return f"✉ answered: {values.get('title', '')} — {said}"
    if event.tag == "tool-result":
        return f"⚙ {values.get('tool', '?')} → {values.get('status', '?')} (later result)"
    if event.tag == "external-command":
        return f"⌁ command {values.get('name', '?')}"
    return _first_line(content)


class Printer:
    """Turns frames into the view's lines (see the module docstring). After an
    ``events-gap`` it re-reads the chat (``history``: the latest lines, oldest first) and
    prints what it had not shown. ``typed``: the texts this terminal sent and has on screen
    already, so their committed lines are not printed again. ``me``: the user's id, so an
    Inbox change says "you" for them.

    While it waits for the user's own line (``expect_answer``), Inbox pushes wait too: a
    turn's item is pushed as the tool posts it, before the turn commits the user's line
    that caused it, and a transcript shows the cause first."""

    def __init__(self, view: View, pid: str, replay_until: int, printed_chat_seq: int,
                 history: Callable[[], list[dict[str, Any]]] | None = None,
                 me: str = "") -> None:
        self.view, self.pid, self.me = view, pid, me  # me: this user's id
        self.history = history
        self.replay_until = replay_until
        self.printed_chat_seq = printed_chat_seq
        self.last_seq = 0
        self.stream = ""  # the reply streaming in
        self.typed: list[str] = []
        self.names: dict[str, str] = {}  # process id → name, for worker lines
        self.detailed: dict[str, Any] | None = None  # the last tool or event line, /details
        self.acting: set[str] = set()  # items this terminal answers or dismisses: it says so
        self.answered = threading.Event()  # an assistant or error line was printed
        self.waiting = False
        self.question: str | None = None  # the user's message that ``pump`` waits to see answered
        self.asked = False                # its own line came: the next assistant line answers it
        self.held: list[dict[str, Any]] = []  # Inbox pushes that came before it

    def expect_answer(self, message_id: str) -> None:
        """Make ``pump`` wait for the answer to the user's message ``message_id``: an error
        line, or an assistant line after that message's own (not, say, a late welcome)."""
        self.question, self.asked, self.waiting = message_id, False, True

    def pump(self, events: queue.Queue[dict[str, Any]], timeout: float) -> bool:
        """Handle frames until the expected answer came; False when the connection closed."""
        while self.waiting:
            try:
                frame = events.get(timeout=timeout)
            except queue.Empty:
                self._release()
                self.view.line("note", "no reply in time")
                return True
            if frame["type"] == "closed":
                self._release()
                return False
            self.handle(frame)
        return True

    def drain(self, events: queue.Queue[dict[str, Any]]) -> None:
        while not events.empty():
            frame = events.get_nowait()
            if frame["type"] != "closed":
                self.handle(frame)

    def handle(self, frame: dict[str, Any]) -> None:
        kind = frame["type"]
        if kind.startswith("inbox-item-") and self.waiting and not self.asked:
            self.held.append(frame)
        elif kind.startswith("inbox-"):
            self._inbox(frame)
        elif kind == "events-gap":
            self._reload(frame["data"]["firstAvailable"])
        elif kind == "event":
            self._event(frame["data"])

    def _inbox(self, frame: dict[str, Any]) -> None:
        kind = frame["type"]
        if kind == "inbox-pending-summary" and frame["data"]["totalPending"]:
            counts = frame["data"]["byCriticality"]
            self.view.line("note", f"inbox: {frame['data']['totalPending']} pending, "
                                   f"{counts['CRITICAL']} critical; /inbox lists them")
        elif kind == "inbox-item-added":
            self.view.line("inbox", item_line(frame["data"]["item"]))
        elif kind == "inbox-item-updated":
            item = frame["data"]["item"]
            if item["id"] in self.acting:  # this terminal's own /answer or /dismiss
                self.acting.discard(item["id"])
            else:
                self.view.line("inbox-update", change_line(item, self.me))

    def _event(self, event: dict[str, Any]) -> None:
        self.last_seq = max(self.last_seq, event["seq"])
        if event["type"] == "process-spawned":
            self.names[event["data"]["childProcessId"]] = event["data"].get("name") or ""
        if event["processId"] != self.pid:
            return
        live = event["seq"] > self.replay_until
        if event["type"] == "token" and live:
            self.stream += event["data"]["text"]
            self.view.preview(self.stream)
        elif event["type"] in ("stream-reset", "turn-restarted") and live:
            # That attempt is void (sent back, or died): the next one streams from the start.
            self._clear()
        elif event["type"] == "chat-message":
            self._chat_line(event["data"])

    def _chat_line(self, line: dict[str, Any]) -> None:
        if line["seq"] <= self.printed_chat_seq:
            return
        self.printed_chat_seq = line["seq"]
        role = line["role"]
        if role == "user":
            if line["content"] in self.typed:
                self.typed.remove(line["content"])  # on screen already: the user typed it
            else:
                self.show(line)
            if line.get("sourceMessageId") == self.question:
                self.asked = True
                self._release()
            return
        if role == "assistant":
            self._clear()
        self.show(line)
        if role == "error" or (role == "assistant" and (self.asked or not self.waiting)):
            self.waiting = False
            self._release()
            self.answered.set()

    def show(self, line: dict[str, Any]) -> None:
        """Print one chat line as the transcript shows it."""
        role, content = line["role"], line["content"]
        if role == "tool":
            self.detailed = line
            name, _, _, body = tool_parts(line)
            result = body.get("result") if isinstance(body, dict) else None
            if name == "process_create" and isinstance(result, dict) and "processId" in result:
                # Its result names the worker: later reports use that name.
                self.names[str(result["processId"])] = str(result.get("name") or "")
            self.view.line("tool", tool_line(line))
        elif role == "event":
            self.detailed = line
            self.view.line("event", event_line(content, self.names))
        else:
            self.view.line(role, content)
            meta = line.get("meta") or {}
            if meta.get("interrupted") is True:
                self.view.line("note", "interrupted")
            if "again" in meta:
                self.view.line("note", "asked again; the earlier attempt is above")
            for source in line.get("sources") or ():  # data: one plain line each
                self.view.line("source", source_label(source))

    def _release(self) -> None:
        """Show the Inbox pushes held while waiting for the user's own line."""
        held, self.held = self.held, []
        for frame in held:
            self._inbox(frame)

    def _clear(self) -> None:
        if self.stream:
            self.stream = ""
            self.view.preview("")

    def _reload(self, first_available: int) -> None:
        """Events were lost (the log was trimmed, or Redis restarted): the chat is the record,
        so show the lines of it not shown yet, as ``handle`` would have, and go on."""
        self.last_seq = max(first_available - 1, 0)
        self._clear()
        self.view.line("note", "some events were lost; reloading the conversation")
        for line in self.history() if self.history else []:
            self._chat_line(line)


def source_label(source: dict[str, Any]) -> str:
    """A reply's source (a ``Citation``) as one plain line: ``guide.md › Install › Linux,
    lines 3-9`` (``, p. 4`` for a PDF's page)."""
    where = str(source.get("documentName") or "?")
    if source.get("section"):
        where += f" › {source['section']}"
    start, end = source.get("lineStart"), source.get("lineEnd")
    if source.get("page") is not None:
        return f"{where}, p. {source['page']}"
    if start is not None:
        return f"{where}, line {start}" if end in (None, start) else \
            f"{where}, lines {start}-{end}"
    return where


def item_line(item: dict[str, Any]) -> str:
    line = f"{item['id']}  {item['type']}  {item['criticality']}  {item['title']}"
    if item["type"] == "DECISION":
        line += "  [" + " | ".join(o["value"] for o in item["payload"]["options"]) + "]"
    elif item["type"] == "ORDERING":
        line += "  [" + ", ".join(i["id"] for i in item["payload"]["items"]) + "]"
    return line


def change_line(item: dict[str, Any], me: str) -> str:
    """An ``inbox-item-updated`` item as one line saying what happened to it last, e.g.
    ``answered by bob: Approve the demo deployment? — approved``."""
    last = (item.get("history") or [{}])[-1]
    action, title = last.get("action"), item["title"]

    def who(user: Any) -> str:
        return "you" if user == me else str(user)

    if action == "ANSWER":
        return f"answered by {who(last.get('by'))}: {title} — {answer_text(item.get('answer'))}"
    if action == "AUTO_ANSWER":
        return f"answered with its default (LOW): {title} — {answer_text(item.get('answer'))}"
    if action == "DISMISS":
        return f"dismissed by {who(last.get('by'))}: {title}"
    if action == "DELEGATE":
        return f"delegated to {who(last.get('toUser'))} by {who(last.get('by'))}: {title}"
    if action == "REVOKE":
        return f"open again (its automatic answer was revoked): {title}  ({item['id']})"
    if action == "ARCHIVE":
        return f"archived: {title}"
    return f"{str(item.get('status', '')).lower()}: {title}"


def inbox_answer(text: str) -> dict[str, Any] | None:
    """The answer an ``inbox-answer`` line carries (an ``AnswerPayload``; a bare value, as
    lines written before answers had outcomes carry, is a DECIDED one); None for none."""
    try:
        answer = json.loads(text)
    except ValueError:
        return None
    if not isinstance(answer, dict):
        return None
    return answer if "outcome" in answer else {"outcome": "DECIDED", "value": answer}


def answer_text(answer: Any) -> str:
    """An item's answer in a few words."""
    if not isinstance(answer, dict):
        return "no answer"
    if answer.get("outcome") == "INSUFFICIENT_INFO":
        return f"lacks information: {_short(str(answer.get('reason')), 60)}"
    if answer.get("outcome") == "UNDECIDABLE":
        return f"cannot decide: {_short(str(answer.get('reason')), 60)}"
    value = answer.get("value") or {}
    if "approved" in value:
        return "approved" if value["approved"] else "declined"
    if value.get("chosen") or value.get("freeText"):
        return _short(" — ".join(str(v) for v in (value.get("chosen"), value.get("freeText"))
                                 if v), 60)
    if "text" in value:
        return _short(str(value["text"]), 60)
    if "orderedIds" in value:
        return _short(", ".join(map(str, value["orderedIds"])), 60)
    return _short(json.dumps(value.get("value", value)), 60)
