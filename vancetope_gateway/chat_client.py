"""``vancetope chat``: a terminal client. Connects, creates or resumes a session, streams replies.

It remembers the session and the last event it saw in ``DATA_DIR/chat-state.json``,
so running it again (even after a server restart) continues the same conversation.
It also shows the user's Inbox: new items as they arrive, and the commands ``/inbox``,
``/answer ITEM VALUE`` and ``/dismiss ITEM`` (``/help`` lists them).
"""

from __future__ import annotations

import contextlib
import getpass
import itertools
import json
import os
import queue
import socket
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from simple_websocket import Client, ConnectionClosed
from simple_websocket import ConnectionError as HandshakeRefused

from vancetope_brain.config import Config
from vancetope_brain.errors import Unauthorized, VancetopeError

REPLY_TIMEOUT = 300.0
RELOAD_LINES = 100
"""Chat lines re-read after an ``events-gap`` (the newest ones)."""


class _Client(Client):
    """simple_websocket's client, closing its socket when the handshake is refused, and
    handling frames that arrived in the same read as the 101 response (simple_websocket
    1.1 leaves them buffered until the next read returns — the server's ping, 25 s later).
    """

    def handshake(self) -> None:
        try:
            super().handshake()
        except BaseException:
            self.sock.close()
            raise
        self.connected = self._handle_events()


class ChatClient:
    """A minimal protocol client: requests with ids, a reader thread, event callbacks."""

    def __init__(self, url: str, token: str) -> None:
        try:
            self._ws = _Client.connect(url, headers={"Authorization": f"Bearer {token}"})
        except HandshakeRefused as e:
            if e.status_code in (401, 403):
                raise Unauthorized(f"the server at {url} refused the token "
                                   f"(HTTP {e.status_code}); check --token") from e
            raise VancetopeError(f"the server at {url} refused the WebSocket upgrade "
                                 f"(HTTP {e.status_code})") from e
        except OSError as e:
            raise VancetopeError(f"cannot reach {url}: {e}; is `vancetope serve` running?") from e
        self._ids = itertools.count(1)
        self._replies: dict[str, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.welcome = json.loads(self._ws.receive(timeout=30))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def request(self, type: str, **data: Any) -> dict[str, Any]:
        """Send a request and wait for its reply; raises VancetopeError on an error frame."""
        rid = str(next(self._ids))
        box: queue.Queue[dict[str, Any]] = queue.Queue(1)
        with self._lock:
            self._replies[rid] = box
        try:
            self._ws.send(json.dumps({"type": type, "id": rid, "data": data}))
        except ConnectionClosed as e:
            reason = f"{e.reason} {e.message}".strip()
            raise VancetopeError(f"the server closed the connection ({reason}); run "
                                 "`vancetope chat` again to reconnect") from None
        frame = box.get(timeout=REPLY_TIMEOUT)
        if frame["type"] == "error":
            err = VancetopeError(f"{frame['data']['code']}: {frame['data']['message']}")
            err.code = frame["data"]["code"]
            raise err
        return frame["data"]

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
        except (ConnectionClosed, TypeError):
            self.events.put({"type": "closed"})


def run_chat(config: Config, *, url: str | None, token: str | None, session_id: str | None,
             new: bool) -> int:
    url = url or f"ws://{config.host}:{config.port}/ws"
    token = token or _default_token(config)
    state_file = config.data_dir / "chat-state.json"
    state = _load_state(state_file)
    client = ChatClient(url, token)
    out = sys.stdout
    interactive = sys.stdin.isatty()
    try:
        session_id = None if new else (session_id or state.get("sessionId"))
        last_seq = state.get("lastSeq", 0) if session_id == state.get("sessionId") else 0
        printed_chat_seq = 0
        session = None
        if session_id:
            listing = client.request("session-list")["sessions"]
            session = next((s for s in listing if s["id"] == session_id), None)
            if session is None:
                print(f"(session {session_id} not found; starting a new one)", file=out)
                session_id = None
        if session_id and session is not None:
            history = client.request("chat-history", processId=session["chatProcessId"],
                                     limit=20)["messages"]
            for line in history:
                _print_line(out, line)
                printed_chat_seq = line["seq"]
            try:
                reply = client.request("session-resume", sessionId=session_id,
                                       lastSeq=last_seq, fingerprint=fingerprint())
                print(f"(resumed session {session_id})", file=out, flush=True)
            except VancetopeError as e:
                if getattr(e, "code", None) != "fingerprint_mismatch":
                    raise
                print("(that session belongs to another machine; starting a new one)",
                      file=out, flush=True)
                session_id = None
        if session_id:
            if reply["contextDrift"]:
                print("(the working directory changed since this session was suspended, so its "
                      "processes stay suspended; type /resume to continue here)", file=out,
                      flush=True)
        else:
            reply = client.request("session-create", title="terminal chat",
                                   fingerprint=fingerprint())
            session_id = reply["session"]["id"]
            print(f"(new session {session_id}; {client.welcome['data']['llm']})", file=out,
                  flush=True)
        chat_pid = reply["chatProcessId"]
        replay_until = reply["lastSeq"]
        tracker = _Printer(out, chat_pid, replay_until, printed_chat_seq,
                           history=lambda: client.request("chat-history", processId=chat_pid,
                                                          limit=RELOAD_LINES)["messages"])
        tracker.drain(client.events)  # the inbox summary that followed the welcome
        for line in _input_lines(interactive):
            if not line.strip():
                continue
            if line.strip() == "/resume":
                client.request("process-resume", processId=chat_pid)
                print("(resumed)", file=out, flush=True)
                continue
            if line.startswith("/"):
                try:
                    _command(client, line.strip(), out)
                except VancetopeError as e:
                    print(f"({e})", file=out, flush=True)
                continue
            steered = client.request("process-steer", targetThinkProcessId=chat_pid, content=line)
            tracker.expect_answer(steered["messageId"])
            if not tracker.pump(client.events, REPLY_TIMEOUT):
                print("(connection closed)", file=out)
                return 1
            _save_state(state_file, {"sessionId": session_id, "lastSeq": tracker.last_seq})
        tracker.drain(client.events)
        _save_state(state_file, {"sessionId": session_id, "lastSeq": tracker.last_seq})
        return 0
    finally:
        client.close()


class _Printer:
    """Prints events: live tokens as they stream, replayed history as whole lines. After an
    ``events-gap`` it re-reads the chat (``history``: the latest lines, oldest first) and
    prints what it had not shown."""

    def __init__(self, out: Any, pid: str, replay_until: int, printed_chat_seq: int,
                 history: Callable[[], list[dict[str, Any]]] | None = None) -> None:
        self.out, self.pid = out, pid
        self.history = history
        self.replay_until = replay_until
        self.printed_chat_seq = printed_chat_seq
        self.last_seq = 0
        self.streaming = False  # the cursor is in the middle of a streamed line
        self.streamed = False   # the next assistant line was already shown as tokens
        self.waiting = False
        self.question: str | None = None  # the user's message that ``pump`` waits to see answered
        self.asked = False                # its own line came: the next assistant line answers it

    def expect_answer(self, message_id: str) -> None:
        """Make ``pump`` wait for the answer to the user's message ``message_id``: an error
        line, or an assistant line after that message's own (not, say, a late welcome)."""
        self.question, self.asked, self.waiting = message_id, False, True

    def pump(self, events: queue.Queue[dict[str, Any]], timeout: float) -> bool:
        while self.waiting:
            try:
                frame = events.get(timeout=timeout)
            except queue.Empty:
                print("\n(no reply in time)", file=self.out)
                return True
            if frame["type"] == "closed":
                return False
            self.handle(frame)
        return True

    def drain(self, events: queue.Queue[dict[str, Any]]) -> None:
        while not events.empty():
            frame = events.get_nowait()
            if frame["type"] != "closed":
                self.handle(frame)

    def handle(self, frame: dict[str, Any]) -> None:
        if frame["type"] == "inbox-pending-summary" and frame["data"]["totalPending"]:
            counts = frame["data"]["byCriticality"]
            print(f"(inbox: {frame['data']['totalPending']} pending, {counts['CRITICAL']} "
                  f"critical; /inbox lists them)", file=self.out, flush=True)
        elif frame["type"] == "inbox-item-added":
            if self.streaming:
                self.out.write("\n")
                self.streaming = False
            print(f"(inbox) {_item_line(frame['data']['item'])}", file=self.out, flush=True)
        elif frame["type"] == "events-gap":
            self._reload(frame["data"]["firstAvailable"])
        if frame["type"] != "event":
            return
        event = frame["data"]
        self.last_seq = max(self.last_seq, event["seq"])
        if event["processId"] != self.pid:
            return
        live = event["seq"] > self.replay_until
        if event["type"] == "token" and live:
            if not self.streaming:
                self.out.write("assistant> ")
                self.streaming = self.streamed = True
            self.out.write(event["data"]["text"])
            self.out.flush()
        elif event["type"] == "turn-restarted" and live:
            # The attempt that streamed this died; its text is void and the next attempt
            # streams its reply from the start.
            if self.streaming:
                self.out.write(" [interrupted: the server restarted this turn]\n")
                self.out.flush()
                self.streaming = False
            self.streamed = False
        elif event["type"] == "chat-message":
            line = event["data"]
            if line["seq"] <= self.printed_chat_seq:
                return
            self.printed_chat_seq = line["seq"]
            if line["role"] == "user" and live:
                self.asked = self.asked or line.get("sourceMessageId") == self.question
                return  # the user just typed it
            if self.streaming:  # end the streamed line before anything else is printed
                self.out.write("\n")
                self.streaming = False
            if line["role"] == "assistant" and self.streamed:
                self.streamed = False  # already shown token by token
            else:
                _print_line(self.out, line)
            if line["role"] == "error" or (line["role"] == "assistant" and self.asked):
                self.waiting = False


    def _reload(self, first_available: int) -> None:
        """Events were lost (the log was trimmed, or Redis restarted): the chat is the record,
        so show the lines of it not shown yet, as ``handle`` would have, and go on."""
        self.last_seq = max(first_available - 1, 0)
        if self.streaming:
            self.out.write("\n")
            self.streaming = False
        self.streamed = False  # a streamed answer may have been cut short: print it whole
        print("(some events were lost; reloading the conversation)", file=self.out, flush=True)
        for line in self.history() if self.history else []:
            if line["seq"] <= self.printed_chat_seq:
                continue
            self.printed_chat_seq = line["seq"]
            if line["role"] == "user" and line.get("sourceMessageId") == self.question:
                self.asked = True  # the user's own line: typed here, already on screen
                continue
            _print_line(self.out, line)
            if line["role"] == "error" or (line["role"] == "assistant" and self.asked):
                self.waiting = False


HELP = """commands:
  /inbox                 your pending Inbox items
  /answer ITEM VALUE     APPROVAL: yes|no; DECISION: an option value (or free text);
                         FEEDBACK: text; ORDERING: ids separated by commas;
                         STRUCTURE_EDIT: JSON
  /answer ITEM ?REASON   "I lack information" (INSUFFICIENT_INFO)
  /answer ITEM !REASON   "I cannot decide" (UNDECIDABLE)
  /dismiss ITEM          click an item away
  /resume                resume a process left suspended by a changed working directory"""


def _command(client: ChatClient, line: str, out: Any) -> None:
    """The Inbox commands (and /help)."""
    verb, _, rest = line.partition(" ")
    item_id, _, text = rest.strip().partition(" ")
    if verb == "/inbox":
        items = client.request("inbox-list", status=["PENDING"], limit=50)["items"]
        for item in items:
            print(_item_line(item), file=out)
        print(f"({len(items)} pending)", file=out, flush=True)
    elif verb == "/dismiss" and item_id:
        client.request("inbox-dismiss", itemId=item_id)
        print("(dismissed)", file=out, flush=True)
    elif verb == "/answer" and item_id and text:
        item = client.request("inbox-item", itemId=item_id)["item"]
        if text[0] in "?!":
            outcome = "INSUFFICIENT_INFO" if text[0] == "?" else "UNDECIDABLE"
            client.request("inbox-answer", itemId=item_id, outcome=outcome,
                           reason=text[1:].strip() or "no reason given")
        else:
            client.request("inbox-answer", itemId=item_id, outcome="DECIDED",
                           value=_answer_value(item, text))
        print("(answered)", file=out, flush=True)
    else:
        print(HELP, file=out, flush=True)


def _answer_value(item: dict[str, Any], text: str) -> dict[str, Any]:
    """What a typed answer means for the item's type (user-interaction.txt §6)."""
    kind = item["type"]
    if kind == "APPROVAL":
        if text.lower() not in ("yes", "y", "no", "n"):
            raise VancetopeError("answer an APPROVAL with yes or no")
        return {"approved": text.lower() in ("yes", "y")}
    if kind == "DECISION":
        values = [o["value"] for o in item["payload"]["options"]]
        return {"chosen": text} if text in values else {"freeText": text}
    if kind == "FEEDBACK":
        return {"text": text}
    if kind == "ORDERING":
        return {"orderedIds": [part.strip() for part in text.split(",") if part.strip()]}
    if kind == "STRUCTURE_EDIT":
        try:
            return {"value": json.loads(text)}
        except ValueError as e:
            raise VancetopeError(f"a STRUCTURE_EDIT answer is JSON: {e}") from e
    raise VancetopeError(f"{kind} items take no answer; /dismiss them")


def _item_line(item: dict[str, Any]) -> str:
    line = f"{item['id']}  {item['type']}  {item['criticality']}  {item['title']}"
    if item["type"] == "DECISION":
        line += "  [" + " | ".join(o["value"] for o in item["payload"]["options"]) + "]"
    elif item["type"] == "ORDERING":
        line += "  [" + ", ".join(i["id"] for i in item["payload"]["items"]) + "]"
    return line


def _print_line(out: Any, line: dict[str, Any]) -> None:
    who = {"user": "you"}.get(line["role"], line["role"])
    print(f"{who}> {line['content']}", file=out, flush=True)


def _input_lines(interactive: bool):  # type: ignore[no-untyped-def]
    while True:
        try:
            line = input("you> ") if interactive else sys.stdin.readline()
        except EOFError:
            return
        if not interactive and line == "":
            return
        yield line.rstrip("\n")


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


def _default_token(config: Config) -> str:
    token = os.environ.get("VANCETOPE_TOKEN")
    if token:
        return token
    path = config.data_dir / "token"
    if path.exists():
        return path.read_text().strip()
    raise Unauthorized(f"no token: pass --token, set VANCETOPE_TOKEN, or run `vancetope serve` "
                       f"once so {path} exists")


def _load_state(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _save_state(path: Path, state: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state))
