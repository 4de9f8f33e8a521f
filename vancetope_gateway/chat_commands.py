"""The slash commands of ``vancetope chat`` that talk to the server: the Inbox, /sessions and
/help (``/details``, ``/summary`` and ``/again`` are ``chat_client``'s: they need the
printer's last lines, the chat's process)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from vancetope_brain.errors import VancetopeError
from vancetope_gateway.chat_view import View, item_line

if TYPE_CHECKING:
    from vancetope_gateway.chat_client import ChatClient

QUIT = "quit"
SESSIONS_PAGE = 20
"""Sessions one ``/sessions`` shows."""
HELP = """commands:
  /inbox                 your pending Inbox items
  /details ITEM          an Inbox item in full: its text, what it asks, its attachment's link
  /answer ITEM VALUE     APPROVAL: yes|no; DECISION: an option value (or free text);
                         FEEDBACK: text; ORDERING: ids separated by commas;
                         STRUCTURE_EDIT: JSON
  /answer ITEM ?REASON   "I lack information" (INSUFFICIENT_INFO)
  /answer ITEM !REASON   "I cannot decide" (UNDECIDABLE)
  /dismiss ITEM          click an item away
  /details               the last tool call or worker report in full
  /sessions              your newest sessions with their titles, 20 a page
                         (`vancetope chat --session ID` continues one)
  /sessions more         the next page of them
  /summary               the summary of this chat's older lines, if it has one
  /again                 ask Arthur again for the last reply (the earlier one stays above)
  /resume                resume a process left suspended by a changed working directory
  /quit                  leave (Ctrl-D too); `vancetope chat` continues the session"""


def command(client: ChatClient, line: str, view: View) -> None:
    """The Inbox commands and /help; an unknown command says so."""
    verb, _, rest = line.partition(" ")
    item_id, _, text = rest.strip().partition(" ")
    if verb == "/inbox":
        items = client.request("inbox-list", status=["PENDING"], limit=50)["items"]
        for item in items:
            view.line("inbox", item_line(item))
        view.line("note", f"{len(items)} pending" +
                  ("; /details ITEM shows one in full" if items else ""))
    elif verb == "/dismiss" and item_id:
        client.request("inbox-dismiss", itemId=item_id)
        view.line("note", "dismissed")
    elif verb == "/answer" and item_id and text:
        item = client.request("inbox-item", itemId=item_id)["item"]
        if text[0] in "?!":
            outcome = "INSUFFICIENT_INFO" if text[0] == "?" else "UNDECIDABLE"
            client.request("inbox-answer", itemId=item_id, outcome=outcome,
                           reason=text[1:].strip() or "no reason given")
        else:
            client.request("inbox-answer", itemId=item_id, outcome="DECIDED",
                           value=_answer_value(item, text))
        view.line("note", "answered")
    elif verb == "/sessions" and rest.strip() in ("", "more"):
        _sessions(client, view, more=rest.strip() == "more")
    elif verb in ("/help", "/inbox", "/dismiss", "/answer", "/sessions"):
        view.line("help", HELP)
    else:
        view.line("note", f"unknown command {verb}; /help lists the commands")


def _sessions(client: ChatClient, view: View, *, more: bool) -> None:
    """A page of ``SESSIONS_PAGE`` of the user's sessions, newest first: the first, or with
    ``more`` the one after the page shown last."""
    if more and client.sessions_after is None:
        view.line("note", "no more sessions; /sessions starts again from the newest")
        return
    page = client.request("session-list", limit=SESSIONS_PAGE,
                          **({"cursor": client.sessions_after} if more else {}))
    client.sessions_after = page.get("nextCursor")
    view.line("help", "\n".join(f"{s['id']}  {s['status']:<9}  {s['title'] or '(untitled)'}"
                                 for s in page["sessions"]) or "(no sessions)")
    if client.sessions_after is not None:
        view.line("note", "older sessions: /sessions more")


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
