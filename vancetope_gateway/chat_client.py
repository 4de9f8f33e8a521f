"""``vancetope chat``: a terminal client. Connects, creates or resumes a session, and shows
the conversation as it happens (``chat_view``), also while the user types (prompt_toolkit
prints above the prompt).

It finds the server and its token from any folder (``discovery``) and remembers the session
and the last event it saw in ``DATA_DIR/chat-state.json``, so running it again (even after a
server restart) continues the same conversation; a lost connection is resumed from that
event, and a line typed meanwhile waits and is sent then. It also shows the user's Inbox:
new items and what happens to items, as it happens, and the commands ``/inbox``,
``/details ITEM``, ``/answer ITEM VALUE`` and ``/dismiss ITEM`` (``/help`` lists them).
Esc or Ctrl-C while a reply streams stops it (``process-interrupt``); Ctrl-C at the prompt
leaves.
"""

from __future__ import annotations

import contextlib
import getpass
import itertools
import json
import os
import queue
import shutil
import socket
import sys
import threading
import uuid
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prompt_toolkit import PromptSession
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import ANSI, FormattedText, to_formatted_text
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.patch_stdout import patch_stdout
from rich.console import Console
from simple_websocket import ConnectionClosed
from simple_websocket import ConnectionError as HandshakeRefused

from vancetope_brain.config import Config
from vancetope_brain.errors import Unauthorized, VancetopeError
from vancetope_gateway.chat_commands import QUIT, command
from vancetope_gateway.chat_details import item_details, item_link, line_details
from vancetope_gateway.chat_find import pick, show_hits
from vancetope_gateway.chat_view import PlainView, Printer, TerminalView, View
from vancetope_gateway.discovery import Token, chat_config, chat_token, server_url
from vancetope_gateway.socket_adapter import WebSocketClient, close_unconnected

REPLY_TIMEOUT = 300.0
RELOAD_LINES = 100
"""Chat lines re-read after an ``events-gap`` (the newest ones)."""
WELCOME_WAIT = 5.0
"""Seconds a new session waits for Arthur's welcome before showing the first prompt."""
RECONNECT_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0)
"""Seconds before each reconnect attempt after a lost connection (about 30 s in all: time
for a server to restart)."""
PREVIEW_LINES = 6
"""Lines of a streaming reply shown above the prompt (its newest ones)."""
UNSENT_LINES = 20
"""Lines typed while the connection is down that wait to be sent after the reconnect."""
CONNECTION_LOST = "connection_lost"
"""The code of a request's error when the connection is down (or went down before its
reply came): sent again with the same idempotency key after a reconnect, it is stored
once."""
LOST: dict[str, Any] = {"type": "error", "data": {
    "code": CONNECTION_LOST, "message": "the connection to the server was lost"}}
REVOKED = (1008, "token revoked")
"""How the gateway closes a socket whose token was revoked (docs/protocol.md "Close
codes"): reconnecting with that token is refused."""


class ChatClient:
    """A minimal protocol client: requests with ids, a reader thread, event callbacks."""

    def __init__(self, url: str, token: str) -> None:
        try:
            self._ws = WebSocketClient.connect(url, headers={"Authorization": f"Bearer {token}"})
        except HandshakeRefused as e:
            if e.status_code in (401, 403):
                raise Unauthorized(f"the server at {url} refused the token "
                                   f"(HTTP {e.status_code}: unknown or revoked)") from e
            raise VancetopeError(f"the server at {url} refused the WebSocket upgrade "
                                 f"(HTTP {e.status_code})") from e
        except OSError as e:
            close_unconnected(e)
            raise VancetopeError(f"cannot reach {url}: {e}; is `vancetope serve` running?") from e
        self._ids = itertools.count(1)
        self._replies: dict[str, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.welcome = json.loads(self._ws.receive(timeout=30))
        self.sessions_after: str | None = None
        """Where ``/sessions more`` goes on: the last page's ``nextCursor`` (``chat_commands``)."""
        self.connected = True
        self._closed_with: tuple[int, str | None] = (1006, "connection lost")
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def request(self, type: str, **data: Any) -> dict[str, Any]:
        """Send a request and wait for its reply; raises VancetopeError on an error frame."""
        rid = str(next(self._ids))
        box: queue.Queue[dict[str, Any]] = queue.Queue(1)
        frame: dict[str, Any]
        with self._lock:
            if self.connected:
                self._replies[rid] = box
        try:
            if not self.connected:
                raise ConnectionClosed(*self._closed_with)
            self._ws.send(json.dumps({"type": type, "id": rid, "data": data}))
        except ConnectionClosed:
            frame = {"type": "error", "data": {
                "code": CONNECTION_LOST,
                "message": f"the server closed the connection ({self.close_reason})"}}
        else:
            frame = box.get(timeout=REPLY_TIMEOUT)
        if frame["type"] == "error":
            err = VancetopeError(f"{frame['data']['code']}: {frame['data']['message']}")
            err.code = frame["data"]["code"]
            raise err
        return frame["data"]

    @property
    def close_reason(self) -> str:
        """Why the connection closed (its close code and reason), once it has."""
        code, message = self._closed_with
        return f"{int(code)} {message or ''}".strip()

    @property
    def revoked(self) -> bool:
        """The server closed the connection because its token was revoked."""
        code, message = self._closed_with
        return (int(code), message) == REVOKED

    def close(self) -> None:
        with contextlib.suppress(ConnectionClosed):  # the server closed it first
            self._ws.close()

    def _read(self) -> None:
        try:
            while True:
                frame = json.loads(self._ws.receive())
                reply_to = frame.get("replyTo")
                if reply_to:
                    with self._lock:
                        box = self._replies.pop(reply_to, None)
                    if box:
                        box.put(frame)
                else:
                    self.events.put(frame)
        except ConnectionClosed as e:
            self._closed_with = (e.reason, e.message)
        except (TypeError, OSError):
            pass
        self.connected = False
        with self._lock:  # requests still waiting get no reply now
            boxes, self._replies = list(self._replies.values()), {}
        for box in boxes:
            box.put(LOST)
        self.events.put({"type": "closed"})


def run_chat(config: Config, *, url: str | None, token: str | None, session_id: str | None,
             new: bool, find: str | None = None) -> int:
    """Connect, open the session and chat: interactively on a terminal, else one message per
    input line, each waiting for its answer. Never a traceback for Ctrl-C or a lost server.
    With ``find``: list the user's sessions holding its words (``chat_find``) and, on a
    terminal, open the one picked at the line found (else exit: 0 if any was found)."""
    config = chat_config(config, os.environ)
    explicit_url, url = url, server_url(config, os.environ, url)
    signed_in = chat_token(config, os.environ, token)
    state_file = config.data_dir / "chat-state.json"
    try:
        client = ChatClient(url, signed_in.secret)
    except KeyboardInterrupt:
        return _interrupted()
    except Unauthorized as e:
        raise Unauthorized(f"{e}; {signed_in.advice()}") from e
    chat = _Chat(client, url, signed_in, state_file,
                 find_url=lambda: server_url(config, os.environ, explicit_url))
    tty = sys.stdin.isatty() and sys.stdout.isatty()
    around = None
    try:
        if find is not None:
            hits = client.request("session-search", query=find)["hits"]
            show_hits(Console(), find, hits)
            picked = pick(hits) if hits and tty else None
            if picked is None:
                return 0 if hits else 1
            session_id, new, around = picked["sessionId"], False, picked["seq"]
        if tty:
            return _interactive(chat, session_id, new, around)
        view = PlainView(sys.stdout)
        chat.printer = Printer(view, "", 0, 0)
        chat.open(view, session_id, new)
        return _piped(chat, view)
    except KeyboardInterrupt:
        return _interrupted()
    finally:
        chat.save()
        chat.client.close()


def _interrupted() -> int:
    print("\n(interrupted; `vancetope chat` continues this session)", flush=True)
    return 130


class _Chat:
    """One terminal's conversation: its connection (replaced on reconnect), session and
    printer, and the lines typed while the connection was down (``unsent``: text and
    idempotency key, oldest first), sent after the reconnect."""

    def __init__(self, client: ChatClient, url: str, token: Token, state_file: Path, *,
                 find_url: Callable[[], str] | None = None) -> None:
        self.client, self.url, self.token, self.state_file = client, url, token, state_file
        self.find_url = find_url  # where the server is now (it may come back on another port)
        self.session_id = ""
        self.pid = ""
        self.printer = Printer(PlainView(sys.stdout), "", 0, 0)
        self.unsent: deque[tuple[str, str]] = deque()
        self._sending = threading.Lock()  # the prompt's lines and the resend keep one order

    def open(self, view: View, session_id: str | None, new: bool,
             around: int | None = None) -> bool:
        """Resume the session (the last one unless told) or create one; True when created.
        Shows the resumed session's recent lines first, and the line ``around`` (its chat
        ``seq``: a search's hit) marked, before them if it is older."""
        client, printer = self.client, self.printer
        printer.me = client.welcome["data"]["userId"]
        state = _load_state(self.state_file)
        session_id = None if new else (session_id or state.get("sessionId"))
        last_seq = state.get("lastSeq", 0) if session_id == state.get("sessionId") else 0
        session = None
        reply: dict[str, Any] = {}
        if session_id:
            try:
                session = client.request("session-get", sessionId=session_id)["session"]
            except VancetopeError as e:
                if getattr(e, "code", None) != "not_found":
                    raise
                view.line("note", f"session {session_id} not found; starting a new one")
                session_id = None
        if session_id and session is not None:
            history = client.request("chat-history", processId=session["chatProcessId"],
                                     limit=20)["messages"]
            if around is not None and (not history or around < history[0]["seq"]):
                history[:0] = client.request("chat-history", processId=session["chatProcessId"],
                                             beforeSeq=around + 1, limit=1)["messages"]
            for line in history:
                if line["seq"] == around:
                    view.line("note", f"found, line {around}:")
                printer.show(line)
                printer.printed_chat_seq = line["seq"]
            try:
                reply = client.request("session-resume", sessionId=session_id,
                                       lastSeq=last_seq, fingerprint=fingerprint())
                view.line("note", f"resumed session {session_id}"
                                  + (f" “{session['title']}”" if session["title"] else ""))
            except VancetopeError as e:
                if getattr(e, "code", None) != "fingerprint_mismatch":
                    raise
                view.line("note", "that session belongs to another machine; starting a new one")
                session_id = None
        if session_id:
            if reply["contextDrift"]:
                view.line("note", "the working directory changed since this session was "
                                  "suspended, so its processes stay suspended; type /resume "
                                  "to continue here")
        else:
            # Untitled: the server titles it from the user's first message.
            reply = client.request("session-create", fingerprint=fingerprint())
            view.line("note", f"new session {reply['session']['id']}; "
                              f"{client.welcome['data']['llm']}")
        self.session_id, self.pid = reply["session"]["id"], reply["chatProcessId"]
        printer.pid, printer.replay_until = self.pid, reply["lastSeq"]
        printer.history = lambda: self.client.request(
            "chat-history", processId=self.pid, limit=RELOAD_LINES)["messages"]
        return not session_id

    def send(self, text: str, *, shown: bool = True, key: str | None = None) -> str:
        """Steer the chat process with the user's message; its message id. ``shown``: the
        text is on screen already (the prompt showed it), so its chat line is not printed.
        ``key``: its idempotency key (sent again with it, a message is stored once)."""
        if shown:
            self.printer.typed.append(text)
        try:
            return str(self.client.request("process-steer", targetThinkProcessId=self.pid,
                                           content=text,
                                           idempotencyKey=key or uuid.uuid4().hex)["messageId"])
        except VancetopeError:
            if shown:
                self.printer.typed.remove(text)
            raise

    def interrupt(self, view: View) -> None:
        """Stop the reply streaming in (Esc or Ctrl-C while it streams): its line then comes
        marked interrupted."""
        try:
            self.client.request("process-interrupt", processId=self.pid)
        except VancetopeError as e:
            view.line("note", f"not stopped: {e}")

    def say(self, text: str) -> None:
        """Send a line the user typed at the prompt. While the connection is down (or it
        goes down before the reply) the line waits in ``unsent`` (at most ``UNSENT_LINES``)
        for ``send_unsent`` after the reconnect; other refusals are raised."""
        key = uuid.uuid4().hex
        with self._sending:
            if not self.unsent:  # else it waits behind the lines typed before it
                try:
                    self.send(text, key=key)
                    return
                except VancetopeError as e:
                    if getattr(e, "code", None) != CONNECTION_LOST:
                        raise
            if len(self.unsent) >= UNSENT_LINES:
                raise VancetopeError(f"not connected, and {UNSENT_LINES} lines wait to be "
                                     "sent already")
            self.unsent.append((text, key))
            self.printer.typed.append(text)  # on screen: the prompt showed it
        self.printer.view.line("note", "not connected: the line waits and is sent once the "
                                       "connection is back")

    def send_unsent(self) -> None:
        """Send the lines typed while the connection was down, in their order (each with
        the key it got when typed, so one whose reply was lost is stored once)."""
        sent = 0
        with self._sending:
            while self.unsent:
                text, key = self.unsent[0]
                try:
                    self.client.request("process-steer", targetThinkProcessId=self.pid,
                                        content=text, idempotencyKey=key)
                except VancetopeError as e:
                    if getattr(e, "code", None) == CONNECTION_LOST:
                        break  # down again: they wait for the next reconnect
                    self.unsent.popleft()
                    self.printer.typed.remove(text)
                    self.printer.view.line("note", f"not sent: “{text}”: {e}")
                    continue
                self.unsent.popleft()
                sent += 1
        if sent:
            self.printer.view.line("note", f"sent {sent} line{'s' if sent > 1 else ''} typed "
                                           "while the connection was down")

    def lost(self, stop: threading.Event) -> bool:
        """The connection closed: reconnect (and send what was typed meanwhile), unless its
        token was revoked; False when the chat cannot go on."""
        if self.client.revoked:
            self._give_up(f"your token was revoked (the server closed the connection: "
                          f"{self.client.close_reason}); {self.token.advice(revoked=True)}")
            return False
        if not self.reconnect(stop):
            return False
        self.send_unsent()
        return True

    def reconnect(self, stop: threading.Event) -> bool:
        """After a lost connection: connect again and resume after the last event seen (the
        missed ones follow, or ``events-gap``); False when the server stays away."""
        view = self.printer.view
        view.line("note", f"lost the connection to {self.url} ({self.client.close_reason}); "
                          "reconnecting…")
        error: Exception | None = None
        for delay in RECONNECT_DELAYS:
            if stop.wait(delay):
                return False
            url = self.find_url() if self.find_url else self.url
            try:
                client = ChatClient(url, self.token.secret)
            except Unauthorized as e:  # e.g. the token was revoked: trying again won't help
                self._give_up(f"{e}; {self.token.advice()}")
                return False
            except VancetopeError as e:
                error = e
                continue
            try:
                client.request("session-resume", sessionId=self.session_id,
                               lastSeq=self.printer.last_seq, fingerprint=fingerprint())
            except VancetopeError as e:
                client.close()
                error = e
                continue
            view.line("note", "reconnected" if url == self.url else f"reconnected to {url}")
            self.client, self.url = client, url
            return True
        self._give_up(f"cannot reach the server ({error}); run `vancetope chat` again when it "
                      "is back")
        return False

    def _give_up(self, why: str) -> None:
        """Say why the chat ends, and which typed lines it did not send."""
        self.printer.view.line("note", why)
        self.drop_unsent()

    def drop_unsent(self) -> None:
        """The chat ends: say which typed lines were never sent."""
        with self._sending:
            unsent, self.unsent = list(self.unsent), deque()
        if unsent:
            self.printer.view.line("note", "not sent: " + "; ".join(f"“{text}”"
                                                                   for text, _ in unsent))

    def save(self) -> None:
        if self.session_id:
            _save_state(self.state_file, {"sessionId": self.session_id,
                                          "lastSeq": self.printer.last_seq})


def _piped(chat: _Chat, view: View) -> int:
    """Input from a pipe (or output to one): each line is a message (or command) and waits
    for its answer; the output is the transcript, the user's lines included, in plain text
    (``PlainView``). It ends after the answer to the last line (and what came meanwhile)."""
    printer = chat.printer
    printer.drain(chat.client.events)  # the welcome and inbox summary, if already here
    for line in sys.stdin:
        line = line.rstrip("\n")
        if not line.strip():
            continue
        if line.startswith("/"):
            if _run_command(chat, line.strip(), view) == QUIT:
                break
            continue
        printer.expect_answer(chat.send(line, shown=False))
        if not printer.pump(chat.client.events, REPLY_TIMEOUT):
            view.line("note", "connection closed")
            return 1
        chat.save()
    printer.drain(chat.client.events)
    return 0


def _interactive(chat: _Chat, session_id: str | None, new: bool,
                 around: int | None = None) -> int:
    """A prompt that stays at the bottom while every frame is shown above it as it arrives,
    with the reply streaming in a preview above the prompt."""
    stop = threading.Event()
    keys = KeyBindings()

    @keys.add("escape", filter=Condition(lambda: bool(chat.printer.stream)), eager=True)
    @keys.add("c-c", filter=Condition(lambda: bool(chat.printer.stream)), eager=True)
    def _stop_reply(event: KeyPressEvent) -> None:  # (not on the prompt's own thread)
        threading.Thread(target=chat.interrupt, args=(view,), daemon=True,
                         name="chat-interrupt").start()

    prompt: PromptSession[str] = PromptSession(key_bindings=keys)

    def redraw() -> None:
        if prompt.app.is_running:
            prompt.app.invalidate()

    def leave() -> None:
        stop.set()
        app = prompt.app
        if app.is_running:
            app.loop.call_soon_threadsafe(lambda: app.exit(exception=EOFError()))  # type: ignore[union-attr]

    with patch_stdout(raw=True):
        view = TerminalView(Console(force_terminal=True), redraw)
        chat.printer = Printer(view, "", 0, 0)
        created = chat.open(view, session_id, new, around)

        def pump() -> None:
            while not stop.is_set():
                frame = chat.client.events.get()
                if frame["type"] == "closed":
                    if stop.is_set() or not chat.lost(stop):
                        leave()
                        return
                    continue
                chat.printer.handle(frame)
                if frame["type"] == "event" and frame["data"]["type"] == "chat-message":
                    chat.save()

        threading.Thread(target=pump, daemon=True, name="chat-events").start()
        if created:  # the welcome comes before the first prompt
            chat.printer.answered.wait(WELCOME_WAIT)

        def message() -> FormattedText:
            you = ("bold ansigreen", "you> ")
            if not view.streaming:
                return FormattedText([you])
            # The prompt does not wrap the lines above its input: rendered to the width.
            width = max(shutil.get_terminal_size().columns - 1, 20)
            tail = view.rendered_preview(width, PREVIEW_LINES)
            return FormattedText([*to_formatted_text(ANSI(f"{tail}\n")), you])

        while not stop.is_set():
            try:
                line = prompt.prompt(message).strip()
            except KeyboardInterrupt:
                view.line("note", "Ctrl-C: bye; `vancetope chat` continues this session")
                break
            except EOFError:
                if not stop.is_set():
                    view.line("note", "bye; `vancetope chat` continues this session")
                break
            if not line:
                continue
            if line.startswith("/"):
                if _run_command(chat, line, view) == QUIT:
                    break
                continue
            try:
                chat.say(line)
            except VancetopeError as e:
                view.line("note", f"not sent: {e}")
        stop.set()
        chat.drop_unsent()
    return 0 if chat.client.connected else 1


def _run_command(chat: _Chat, line: str, view: View) -> str | None:
    """One slash command; ``QUIT`` when the user leaves. Refusals are shown, not raised."""
    verb = line.split(" ", 1)[0]
    try:
        if verb in ("/quit", "/exit"):
            return QUIT
        if verb == "/resume":
            chat.client.request("process-resume", processId=chat.pid)
            view.line("note", "resumed")
        elif verb == "/again":
            chat.client.request("process-command", processId=chat.pid, command="regenerate",
                                idempotencyKey=uuid.uuid4().hex)
            view.line("note", "asking again")
        elif verb == "/details":
            _details(chat, line.split()[1:], view)
        elif verb == "/summary":
            _summary(chat, view)
        else:
            words = line.split()
            acts = (verb == "/answer" and len(words) > 2) or (verb == "/dismiss" and len(words) > 1)
            item = words[1] if acts else ""
            if item:  # its update is pushed too: the command's own note says it
                chat.printer.acting.add(item)
            try:
                command(chat.client, line, view)
            except VancetopeError:
                chat.printer.acting.discard(item)
                raise
    except VancetopeError as e:
        if getattr(e, "code", None) == CONNECTION_LOST:
            view.line("note", f"not connected: {verb} works again once the connection is back")
        else:
            view.line("note", str(e))
    return None


def _details(chat: _Chat, words: list[str], view: View) -> None:
    """``/details ITEM``: an Inbox item in full (and its attachment's link); ``/details``:
    the last tool call or worker report."""
    printer = chat.printer
    names = {**printer.names, chat.pid: "this chat"}
    if words:
        item = chat.client.request("inbox-item", itemId=words[0])["item"]
        view.line("details", item_details(item, names))
        if link := item_link(item, chat.url):
            view.line("link", link)
    elif printer.detailed is not None:
        view.line("details", line_details(printer.detailed, names))
    else:
        view.line("help", "(no tool call or worker report yet; /details ITEM shows an "
                          "Inbox item)")


def _summary(chat: _Chat, view: View) -> None:
    """``/summary``: the rolling summary of this chat's older lines, which the model sees in
    their place (``engineState.chatHistorySummary``, docs/architecture.md "The chat
    summary")."""
    process = chat.client.request("process-status", processId=chat.pid)["process"]
    summary = (process.get("engineState") or {}).get("chatHistorySummary")
    if summary:
        view.line("details", f"Summary of lines 1–{summary['throughSeq']} (the model sees it "
                             f"in their place):\n{summary['text']}")
    else:
        view.line("help", "(no summary yet: the model still sees the whole chat)")


def fingerprint() -> dict[str, str]:
    """This client's context (think-engines §6): machine, working directory, home, OS user."""
    return {"machineId": _machine_id(), "workingDir": os.getcwd(),
            "userHome": str(Path.home()), "osUser": getpass.getuser()}


def _machine_id() -> str:
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            value = Path(path).read_text().strip()
        except OSError:
            continue
        if value:
            return value
    return f"{socket.gethostname()}-{uuid.getnode():012x}"


def _load_state(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _save_state(path: Path, state: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state))
