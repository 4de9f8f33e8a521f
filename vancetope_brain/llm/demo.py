"""``DemoModel``: the offline model that runs when no LLM endpoint is configured.

Deterministic, no network. Its every answer says what it is and how to
configure a real endpoint, so nobody mistakes it for a model. Offered
Arthur's tools, it shows delegation, picking the worker by keywords
(``_DELEGATION``): research or a deep dive goes to ``marvin``, a strategy, an
approval or "run the … process" to ``vogon`` (strategy ``draft-review``), a council,
opinions, pros and cons or "should we …" to ``zaphod``, any other piece of work
(analyze, summarize, compare …) to ``analyze``; when the worker's
``<process-event>`` arrives it relays the result (or, blocked, its question).
Offered only ``respond`` (a worker), it answers its goal with a demo result, in
its persona's voice when it is a council head; offered zaphod's synthesis tool,
it sums up the heads' answers. Offered ``inbox_post``, it posts Inbox items when
asked ("ask me for approval", "show me every kind of inbox item": ``demo_inbox``)
and reports each answer in the chat. Offered agrajag's ``tool_probe`` or
``tool_health_write``, it probes and gives a verdict; a worker told to "call <tool>" calls
it (``demo_agrajag``). Asked what the documents say, it quotes the passages of the
``<rag-context>`` block in its prompt with their sources, and asked what it remembers, it
lists the entries of the ``<project-memory>`` block (``demo_rag``). Asked to summarise
a long chat, it lists the first words of its messages (``demo_summary``).
"""

from __future__ import annotations

import json
import re
import textwrap
import time
from xml.sax.saxutils import unescape

from vancetope_brain.llm.base import LlmMessage, LlmResponse, TokenSink, ToolCall, ToolSpec
from vancetope_brain.llm.demo_agrajag import agrajag_call, named_tool_call
from vancetope_brain.llm.demo_inbox import answer_report, inbox_calls, posted_report
from vancetope_brain.llm.demo_rag import documents_answer, memory_answer
from vancetope_brain.llm.demo_summary import summary_answer

_QUOTE_LIMIT = 80

TRY: list[tuple[str, str]] = [
    ("please research green tea", "marvin plans a small tree of workers and reports"),
    ("run the strategy for a tea slogan",
     "vogon drafts it in phases and asks for your approval in the Inbox"),
    ("give me the pros and cons of remote work", "a zaphod council of personas weighs it"),
    ("analyze the quarterly numbers", "a ford worker analyzes it"),
    ("what do my documents say about citations",
     "I search the project's documents (`vancetope serve` adds a sample) and answer "
     "with their sources"),
    ("ask me for approval", "I put an approval into your Inbox and tell you what you answered"),
    ("show me every kind of inbox item", "one Inbox item of each of the eight types"),
]
"""What Arthur's welcome on the demo model suggests: a phrase (``_DELEGATION``,
``demo_rag.ASKS_DOCUMENTS`` and ``demo_inbox.PHRASES`` pick it up) and what it shows; one per
worker engine, the documents, then the Inbox."""


def welcome_hint() -> str:
    """Added to Arthur's welcome when the demo model answers: what a new user can try."""
    tried = "\n".join(f"- “{phrase}” — {shows}" for phrase, shows in TRY)
    return ("\n\nNo LLM is configured, so the offline demo model answers: its words are "
            "canned, but the workers, the Inbox and the streaming are real. Try:\n"
            f"{tried}\n\nAnswer Inbox items in the web client's Inbox, or in `vancetope chat` "
            "with `/inbox` and `/answer ITEM VALUE`.")


def welcome_suggestions() -> list[str]:
    """The phrases ``welcome_hint`` suggests, as the welcome line's ``meta.suggestions``: a
    client may offer each as a button that sends it."""
    return [phrase for phrase, _ in TRY]


class DemoModel:
    """A ChatModel that answers every conversation with a fixed, streamed explanation.

    ``token_delay`` (seconds) pauses between streamed words, to make streaming
    visible in a demo; the server passes ``VANCETOPE_DEMO_TOKEN_DELAY`` (through the
    profile ``default``), the constructor's default streams at once, as tests want.
    Thread-safe (stateless).
    """

    name = "demo"

    def __init__(self, *, token_delay: float = 0.0) -> None:
        self.token_delay = token_delay

    def complete(
        self,
        messages: list[LlmMessage],
        *,
        tools: list[ToolSpec] | None = None,
        on_token: TokenSink | None = None,
    ) -> LlmResponse:
        """Answer with the demo text (through ``respond`` when offered); never fails."""
        names = {t.name for t in tools or ()}
        if (probe := agrajag_call(messages, names) or named_tool_call(messages, tools or [])):
            return LlmResponse(content="", tool_calls=(probe,), finish_reason="tool_calls",
                               model=self.name)
        if COUNCIL_TOOL in names:
            return LlmResponse(content="", tool_calls=(council_synthesis(messages),),
                               finish_reason="tool_calls", model=self.name)
        if {"inbox_post", "respond"} <= names and messages and messages[-1].role == "user" \
                and (posts := inbox_calls(messages[-1].content)):
            return LlmResponse(content="", tool_calls=posts, finish_reason="tool_calls",
                               model=self.name)
        call = _demo_call(messages, names)
        if call is not None and call.name != "respond":
            return LlmResponse(content="", tool_calls=(call,), finish_reason="tool_calls",
                               model=self.name)
        text = json.loads(call.arguments)["message"] if call else \
            summary_answer(messages) or demo_answer(messages)
        if on_token is not None:
            for i, word in enumerate(split_words(text)):
                if i and self.token_delay > 0:
                    time.sleep(self.token_delay)
                on_token(word)
        return LlmResponse(content=text, tool_calls=(call,) if call else (),
                           finish_reason="tool_calls" if call else "stop", model=self.name)


_DELEGATION: list[tuple[re.Pattern[str], dict[str, object]]] = [
    (re.compile(r"\b(strateg\w*|approv\w*|sign[- ]off|run the \w+( \w+)? process)",
                re.IGNORECASE),
     {"recipe": "vogon", "name": "demo-strategy", "params": {"strategy": "draft-review"}}),
    (re.compile(r"\b(council|opinions?|pros and cons|trade-?offs?|should (we|i))\b",
                re.IGNORECASE),
     {"recipe": "zaphod", "name": "demo-council"}),
    (re.compile(r"\b(research\w*|deep[- ]?dive|dig into|investigate)", re.IGNORECASE),
     {"recipe": "marvin", "name": "demo-research"}),
    (re.compile(r"\b(analy[sz]e|summari[sz]e|compare|review|plan)", re.IGNORECASE),
     {"recipe": "analyze", "name": "demo-worker"}),
]
"""Keywords of a request → the worker the demo starts for it; the first match wins."""
_SPAWN_ID = "demo_spawn"
_EVENT = re.compile(r'<process-event sourceProcessId="([^"]*)"'
                    r"""(?: sourceName=("[^"]*"|'[^']*'))? type="([a-z]+)">(.*?)"""
                    r"(?:<payload>|</process-event>)", re.DOTALL)
_INBOX_ASK = re.compile(r'<payload>[^<]*"itemId"')
"""A blocked event whose payload names an Inbox item: the worker asked there."""


def _respond(message: str, awaiting: bool = False) -> ToolCall:
    return ToolCall("demo_respond", "respond",
                    json.dumps({"message": message, "awaiting_user_input": awaiting}))


def _demo_call(messages: list[LlmMessage], tools: set[str]) -> ToolCall | None:
    """What the demo does with tools: delegate, relay, or just respond."""
    if (marvin := marvin_demo_call(messages, tools)) is not None:
        return marvin
    if "respond" not in tools:
        return None
    if (report := posted_report(messages) or answer_report(messages)) is not None:
        return _respond(report)
    last = messages[-1] if messages else LlmMessage("user", "")
    if "process_create" not in tools:  # a worker: its goal is the first user message
        goal = next((m.content for m in messages if m.role == "user"), "")
        if persona := _PERSONA.search(messages[0].content if messages else ""):
            return _respond(council_head_answer(persona.group(1), goal))
        return _respond(f"Demo result for “{quote(goal)}”: the "
                        "offline demo model did no real work, but this is where a worker's "
                        "findings would be.")
    if last.role == "tool" and last.tool_call_id == _SPAWN_ID:
        return _started(last.content)
    event = _EVENT.search(last.content) if last.role == "user" else None
    if event:
        source, name, kind, summary = event.groups()
        if name:
            source = _attribute(name)
        summary = unescape(summary).strip()
        if kind == "blocked" and _INBOX_ASK.search(last.content):  # asked in the Inbox
            return _respond(f"The worker {source} put a question into your Inbox: {summary} "
                            "Answer it there (in the terminal: /inbox); the answer goes "
                            "straight to the worker.")
        if kind == "blocked":
            return _respond(introduce(f"The worker {source} asks:", summary), awaiting=True)
        return _respond(introduce(f"The worker {source} is {kind}. It reports:", summary))
    if (answer := documents_answer(messages) or memory_answer(messages)) is not None:
        return _respond(answer)
    spawn = next((args for pattern, args in _DELEGATION if pattern.search(last.content)), None) \
        if last.role == "user" else None
    if spawn is not None:
        return ToolCall(_SPAWN_ID, "process_create",
                        json.dumps({**spawn, "goal": last.content}))
    return _respond(demo_answer(messages) + " To see how I delegate work to worker processes, "
                    "ask me to analyze something, to research a question, to run the draft-review "
                    "strategy with approval, or for pros and cons of a choice. To try the Inbox, "
                    "say “ask me for approval” or “show me every kind of inbox item”.")


_BLOCK_START = re.compile(r"#{1,6}\s|[-*+]\s|\d{1,9}[.)]\s|```|~~~|>|\|")
"""How a Markdown block that cannot continue a sentence begins: a heading, a list item, a
code fence, a quote, a table row."""


def introduce(lead: str, text: str) -> str:
    """``lead`` then ``text``: in the same sentence, unless ``text`` opens with a Markdown
    block (a report's heading, a list), which then starts a paragraph of its own."""
    return f"{lead}\n\n{text}" if _BLOCK_START.match(text) else f"{lead} {text}"


def _started(result: str) -> ToolCall:
    """Arthur's answer once ``process_create`` returned: started, or why not."""
    try:
        body = json.loads(result)
    except ValueError:
        body = {}
    if not isinstance(body, dict) or "result" not in body:
        error = body.get("error") if isinstance(body, dict) else None
        return _respond(f"I could not start a worker: {error or result}. (Offline demo model.)")
    started = body["result"] or {}
    return _respond(f"I started a worker ({started.get('name', 'worker')}) with the recipe "
                    f"{started.get('recipe') or started.get('engine', '?')} on that and will "
                    "tell you when it reports back. (Offline demo model.)")


COUNCIL_TOOL = "council_synthesis"
"""The tool zaphod's synthesizer call offers (``vancetope_brain.engines.zaphod``)."""
_PERSONA = re.compile(r"Your persona: (.+)")
_HEAD = re.compile(r"""<head name=("[^"]*"|'[^']*') persona=("[^"]*"|'[^']*')>\n(.*?)\n</head>""",
                   re.DOTALL)
_MISSING = re.compile(r"Missing heads \(no answer\): ([^.]*)\.")


def _attribute(quoted: str) -> str:
    """An attribute's value as ``quoteattr`` wrote it (in either quotes), unescaped."""
    return unescape(quoted[1:-1], {"&quot;": '"', "&#10;": "\n", "&#13;": "\r", "&#9;": "\t"})


def council_head_answer(persona: str, goal: str) -> str:
    """A council head's demo answer: the question seen through its persona."""
    question = quote(goal)
    return (f"Speaking as {persona}: on “{question}” I would look first at what my "
            "perspective cares about most. (Offline demo model: no real reasoning happened.)")


def council_synthesis(messages: list[LlmMessage]) -> ToolCall:
    """zaphod's synthesis from the heads' answers shown in the last message."""
    shown = messages[-1].content if messages else ""
    heads = [(_attribute(name), _attribute(persona), unescape(answer))
             for name, persona, answer in _HEAD.findall(shown)]
    missing = _MISSING.search(shown)
    names = ", ".join(name for name, _, _ in heads) or "no head"
    conclusion = (f"Weigh the {len(heads)} perspectives above; with a real model configured "
                  "the council would reach a real recommendation.")
    if missing:
        conclusion += f" Missing: {missing.group(1)}, so that perspective is not heard."
    return ToolCall("demo_synthesis", COUNCIL_TOOL, json.dumps({
        "consensus": f"{names} each answered from their own point of view; all agree the "
                     "question deserves a decision.",
        "differences": [f"{name} ({persona}) emphasises its own perspective."
                        for name, persona, _ in heads],
        "conclusion": conclusion + " (Offline demo model.)"}))


def demo_answer(messages: list[LlmMessage]) -> str:
    """The demo model's answer to ``messages``: refers to the last user message."""
    last = next((m.content for m in reversed(messages) if m.role == "user"), "")
    last = quote(last)
    heard = f"You said: “{last}”. " if last else ""
    return (
        f"{heard}I am Vancetope's offline demo model, so I can't really answer yet. "
        "To talk to a real model, set OPENAI_API_KEY (for OpenAI) or OPENAI_BASE_URL "
        "(for any OpenAI-compatible server such as vLLM or Ollama), optionally "
        "VANCETOPE_LLM_MODEL, and restart the server."
    )


def quote(text: str, limit: int = _QUOTE_LIMIT) -> str:
    """``text`` on one line in at most ``limit`` characters: cut after a whole word, with an
    ellipsis (a single word longer than that is cut inside)."""
    short = textwrap.shorten(text, limit, placeholder="…")
    return short if short != "…" else " ".join(text.split())[:limit - 1] + "…"


def split_words(text: str) -> list[str]:
    """Split ``text`` into word-plus-trailing-space pieces that join back to ``text``."""
    return re.findall(r"\s*\S+\s*", text) if text.strip() else ([text] if text else [])


def marvin_demo_call(messages: list[LlmMessage], tools: set[str]) -> ToolCall | None:
    """Marvin's structured calls and its workers' JSON reports, so a newcomer sees a small
    tree work: a plan of two parallel workers and an aggregate, then a report."""
    text = messages[-1].content if messages else ""
    if "marvin_plan" in tools:
        goal = text.split("\n")[1] if "\n" in text else text
        goal = quote(goal)
        return ToolCall("demo_plan", "marvin_plan", json.dumps({
            "steps": [{"kind": "WORKER", "goal": f"Gather the facts about: {goal}"},
                      {"kind": "WORKER", "goal": f"Weigh the options and risks of: {goal}"}],
            "aggregate": "Combine the facts and the assessment into a short report."}))
    if "marvin_aggregate" in tools:
        goal = text.split("\n")[0].removeprefix("Aggregate the results of the plan for: ")
        steps = json.loads(text.split("The steps and their results:\n", 1)[1]) \
            if "The steps and their results:\n" in text else []
        lines = "".join(f"\n- **{s['goal'].splitlines()[0]}** — {s.get('summary', s['status'])}"
                        for s in steps)
        return ToolCall("demo_aggregate", "marvin_aggregate", json.dumps({
            "summary": f"**Report on “{quote(goal)}”** (offline demo "
                       f"model: the structure is real, the content is not).{lines}",
            "result": {"steps": len(steps), "demo": True}}))
    system = messages[0].content if messages and messages[0].role == "system" else ""
    if "respond" in tools and "process_create" not in tools and '"needsPlanning"' in system:
        step = re.search(r"Your step: (.*)", system)
        goal = step.group(1).strip() if step else "the step"
        return _respond(json.dumps({
            "summary": f"Demo result for “{quote(goal)}”: the offline demo model did "
                       "no real work, but this is where the worker's findings would be.",
            "result": {"step": quote(goal), "demo": True},
            "needsPlanning": False, "followUps": []}, ensure_ascii=False))
    return None
