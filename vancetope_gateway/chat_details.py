"""What ``vancetope chat``'s ``/details`` shows, as a person reads it: an Inbox item in full
(``/details ITEM``: its text, its options or value, an attachment's link), or the last tool
call or worker report (``/details``) — never the raw ``<process-event>`` XML or tool JSON
the model saw.

Each is one Markdown text: what is Markdown already (an item's body, a worker's report) as
it is, everything structured (a payload, a tool's arguments and result) as nested lists.
The views print it (``TerminalView`` renders the Markdown; neither reads anything in it as
terminal markup or control codes).
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from vancetope_gateway.chat_view import answer_text, inbox_answer, size_text, tagged, tool_parts

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SHOWN_PAYLOAD = {
    "APPROVAL": {"default"},
    "DECISION": {"options", "default", "allowFreeText"},
    "FEEDBACK": {"placeholder", "maxLength"},
    "ORDERING": {"items"},
    "STRUCTURE_EDIT": {"schema", "value"},
    "OUTPUT_TEXT": {"format"},
    "OUTPUT_IMAGE": {"attachmentId", "url", "filename", "mimeType", "sizeBytes", "caption"},
    "OUTPUT_DOCUMENT": {"attachmentId", "url", "filename", "mimeType", "sizeBytes", "caption"},
}
"""The payload keys each item type's own section shows; any other key is listed as is."""


def line_details(line: dict[str, Any], names: dict[str, str]) -> str:
    """A ``tool`` or ``event`` chat line in full; ``names``: process id → name."""
    if line["role"] == "tool":
        return _tool_details(line)
    event = tagged(line["content"])
    if event is None:
        return str(line["content"])
    values = event.attrs
    if event.tag == "process-event":
        source = values.get("sourceProcessId", "?")
        who = values.get("sourceName") or names.get(source) or source
        parts = [f"**◆ worker {who}: {values.get('type', '?').replace('_', ' ')}**",
                 event.text.strip()]
        data = _json(event.payload) if event.payload else None
        if isinstance(data, dict) and data:
            parts += ["Data:", readable(data)]
            if isinstance(data.get("itemId"), str):
                parts.append(f"`/details {data['itemId']}` shows the Inbox item.")
        return _join(parts)
    if event.tag == "inbox-answer":
        return _join([f"**✉ answered: {values.get('title', '')}** "
                      f"({values.get('type', '?')}, {values.get('itemId', '?')})",
                      answer_details(inbox_answer(event.text)) or event.text])
    if event.tag == "tool-result":
        result = _json(event.text)
        return _join([f"**⚙ {values.get('tool', '?')} → {values.get('status', '?')}** "
                      "(a result that came later)",
                      readable(result) if result is not None else event.text])
    if event.tag == "external-command":
        return _join([f"**⌁ command {values.get('name', '?')}**", readable(_json(event.text))])
    return str(line["content"])


def item_details(item: dict[str, Any], names: dict[str, str]) -> str:
    """An Inbox item (as ``inbox-item`` answers it) in full, with how to answer it (an
    attachment's link is ``item_link``'s)."""
    kind, payload = item["type"], dict(item.get("payload") or {})
    origin = item.get("originProcessId")
    facts = [kind, item["criticality"], item["status"]]
    if origin:
        facts.append(f"from {names.get(origin) or origin}")
    rest = {k: v for k, v in payload.items() if k not in _SHOWN_PAYLOAD.get(kind, set())}
    shown = [_payload_details(item, payload), readable(rest) if rest else ""]
    status = answer_details(item["answer"]) if item.get("answer") else \
        _how_to_answer(item) if item["status"] == "PENDING" else ""
    # An output's attachment link (``item_link``) follows: its sentence comes last.
    ordered = [status, *shown] if kind.startswith("OUTPUT_") else [*shown, status]
    return _join([f"**✉ {item['title']}**", " · ".join(facts), (item.get("body") or "").strip(),
                  *ordered])


def answer_details(answer: Any) -> str:
    """An item's answer (``AnswerPayload``) in full: what was answered, by whom, why."""
    if not isinstance(answer, dict) or "outcome" not in answer:
        return ""
    lines = [f"- **answer**: {answer_text(answer)}"]
    value = (answer.get("value") or {}).get("value")
    if isinstance(value, (dict, list)):  # a STRUCTURE_EDIT's edited value
        lines.append(_indent(readable(value)))
    if answer.get("reason") and answer.get("outcome") == "DECIDED":
        lines.append(f"- **reason**: {answer['reason']}")
    if answer.get("answeredBy"):
        lines.append(f"- **by**: {answer['answeredBy']}")
    return "\n".join(lines)


def readable(value: Any) -> str:
    """Structured data as a nested Markdown list: ``camelCase`` keys as words, a list of
    records one line per record, text of several lines as a block of its own."""
    if isinstance(value, dict):
        return "\n".join(_entry(f"**{_key(k)}**: ", v) for k, v in value.items()) or "(empty)"
    if isinstance(value, list):
        return "\n".join(_entry("", v) for v in value) or "(none)"
    return _scalar(value)


def item_link(item: dict[str, Any], server_url: str) -> str:
    """The link that opens an item's attachment ("" for none), at the address ``server_url``
    (``ws[s]://host:port/…``, how this client reached the server) names, as the web client
    does: the signed URL names the server's configured base URL, which need not be how
    this client reached it (``serve`` on port 0, a wildcard bind)."""
    url = (item.get("payload") or {}).get("url")
    if not isinstance(url, str):
        return ""
    server, signed = urlsplit(server_url), urlsplit(url)
    scheme = "https" if server.scheme in ("wss", "https") else "http"
    return urlunsplit((scheme, server.netloc, signed.path, signed.query, ""))


def _tool_details(line: dict[str, Any]) -> str:
    name, status, args, body = tool_parts(line)
    parts = [f"**⚙ {name} → {status or '?'}**"]
    if isinstance(args, dict) and args:
        parts += ["Arguments:", readable(args)]
    if isinstance(body, dict) and "error" in body:
        parts += ["Error:", readable(body["error"])]
    elif isinstance(body, dict) and "result" in body:
        parts += ["Result:", readable(body["result"])]
    elif " → " in line["content"]:  # a result cut at its size limit: what there is of it
        parts += ["Result (cut):", _fenced(line["content"].split(" → ", 1)[1])]
    return _join(parts)


def _payload_details(item: dict[str, Any], payload: dict[str, Any]) -> str:
    """What the item's type asks or shows, from its payload, in paragraphs."""
    kind, default = item["type"], payload.get("default")
    parts: list[str] = []
    if kind == "APPROVAL" and default:
        parts.append(f"Default: {default}")
    elif kind == "DECISION":
        options = []
        for option in payload.get("options") or []:
            label = option.get("label") or option["value"]
            shown = f"- **{option['value']}**" + (f" — {label}" if label != option["value"] else "")
            if option.get("description"):
                shown += f": {option['description']}"
            options.append(shown + (" (default)" if option["value"] == default else ""))
        if payload.get("allowFreeText"):
            options.append("- or an answer in your own words")
        parts.append("\n".join(options))
    elif kind == "FEEDBACK":
        if payload.get("placeholder"):
            parts.append(f"Asks: {payload['placeholder']}")
        if payload.get("maxLength"):
            parts.append(f"At most {payload['maxLength']} characters.")
    elif kind == "ORDERING":
        parts.append("\n".join(f"{n}. **{entry['id']}** — {entry.get('label') or entry['id']}"
                               for n, entry in enumerate(payload.get("items") or [], 1)))
    elif kind == "STRUCTURE_EDIT":
        parts += ["Current value (answer with the edited JSON):",
                  _fenced(json.dumps(payload.get("value"), ensure_ascii=False), "json")]
        fields = (payload.get("schema") or {}).get("properties")
        if isinstance(fields, dict) and fields:
            parts += ["Fields:", readable(fields)]
    elif kind in ("OUTPUT_IMAGE", "OUTPUT_DOCUMENT"):
        if payload.get("caption"):
            parts.append(str(payload["caption"]))
        about = [str(payload["mimeType"])] if payload.get("mimeType") else []
        if payload.get("sizeBytes") is not None:
            about.append(size_text(payload["sizeBytes"]))
        what = str(payload.get("filename") or "the attachment") + \
            (f" ({', '.join(about)})" if about else "")
        # The link itself follows on a line of its own (``item_link``), which no renderer
        # wraps.
        parts.append(f"Open {what} with the link below; it works for a few minutes "
                     f"(`/details {item['id']}` gives a new one)." if payload.get("url")
                     else "The attachment is not available.")
    return _join(parts)


def _how_to_answer(item: dict[str, Any]) -> str:
    ref, kind = item["id"], item["type"]
    how = {"APPROVAL": f"`/answer {ref} yes` or `/answer {ref} no`",
           "DECISION": f"`/answer {ref} VALUE` (an option's value, or your own words)",
           "FEEDBACK": f"`/answer {ref} TEXT`",
           "ORDERING": f"`/answer {ref} ID,ID,…` (the ids in your order)",
           "STRUCTURE_EDIT": f"`/answer {ref} JSON`"}.get(kind)
    lack = f"`/answer {ref} ?REASON` if you lack information"
    if how:
        return f"Answer with {how}; {lack}; `/dismiss {ref}` clicks it away."
    return f"Nothing to answer: `/dismiss {ref}` clicks it away."


def _entry(label: str, value: Any) -> str:
    if isinstance(value, dict) and {"outcome", "answeredBy"} <= value.keys():
        # An Inbox answer (a strategy's checkpoint, say): as the terminal says answers.
        return f"- {label}{answer_text(value)} (by {value['answeredBy']})"
    if isinstance(value, dict) and value:
        if all(not isinstance(v, (dict, list)) for v in value.values()) and label == "":
            # A record in a list: one line, its fields in order.
            return "- " + " · ".join(f"{_key(k)}: {_scalar(v)}" for k, v in value.items())
        return f"- {label}".rstrip() + f"\n{_indent(readable(value))}"
    if isinstance(value, list) and value:
        if all(not isinstance(v, (dict, list)) for v in value):
            return f"- {label}{', '.join(_scalar(v) for v in value)}"
        return f"- {label}".rstrip() + f"\n{_indent(readable(value))}"
    text = _scalar(value)
    if "\n" in text:  # a text of its own (a report, a body): a block under its label
        return f"- {label}".rstrip() + f"\n\n{_indent(text)}\n"
    return f"- {label}{text}"


def _scalar(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (dict, list)):
        return "(empty)" if not value else json.dumps(value, ensure_ascii=False)
    return str(value).strip()


def _key(key: Any) -> str:
    return _CAMEL.sub(" ", str(key)).lower().replace("_", " ")


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" if line else "" for line in text.splitlines())


def _fenced(text: str, lang: str = "") -> str:
    """``text`` as a code block whose fence no backtick run inside it can close."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _join(parts: list[str]) -> str:
    return "\n\n".join(part for part in parts if part)
