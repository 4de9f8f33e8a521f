"""Recipes in running processes: the snapshot survives edits, the cascade picks the innermost
recipe, and a recipe's tool changes decide what the model is offered and may call.
"""

from __future__ import annotations

import contextlib
import json

import pytest

from tests.engines.test_arthur import call, respond, spawn_worker
from tests.helpers import wait_for
from vancetope_brain.engines import ENGINES
from vancetope_brain.errors import NotFound
from vancetope_brain.llm import LlmResponse, ToolSpec
from vancetope_brain.models import ProcessStatus
from vancetope_brain.recipes import RecipeAdmin
from vancetope_brain.recipes.loader import parse_recipe
from vancetope_brain.store import SessionStore
from vancetope_brain.tools.dispatcher import SERVER_TOOLS, server_tool

RECIPE = """
name: analyze
engine: ford
category: worker
description: {level} analysis worker
promptOverride: "You are the {level} analyst."
allowedToolsAdd: {add}
allowedToolsRemove: {remove}
roles: {roles}
"""


def _put(emb, level: str, project: str | None, add: str = "[]", remove: str = "[]",
         roles: str = "[]") -> None:
    text = RECIPE.format(level=level, add=add, remove=remove, roles=roles)
    # As the operator puts it (the admin CLI): only the operator grants engine roles.
    RecipeAdmin.on(emb.brain.store, engine=ENGINES.get, operator=True).put(
        "acme", project, parse_recipe(text, level))


def test_project_beats_tenant_beats_bundled_and_edits_spare_running_processes(embedded):
    prompts = []

    def worker(messages, tools):
        prompts.append(messages[0].content)
        return respond("need more?", awaiting=True)

    _put(embedded, "tenant", None)
    _put(embedded, "project", "default")
    try:
        session, w = spawn_worker(embedded, worker)
        wait_for(lambda: embedded.brain.store.port(SessionStore).get_process("acme", w.id).status
                 is ProcessStatus.BLOCKED, timeout=15)
        assert prompts[-1].startswith("You are the project analyst.")
        assert w.recipe["source"] == "project"
        _put(embedded, "edited", "default")  # edit the recipe while the worker runs
        embedded.brain.sessions.steer(embedded.who, w.id, "carry on")
        wait_for(lambda: len(prompts) == 2, timeout=15)
        assert prompts[-1].startswith("You are the project analyst.")  # its snapshot
        embedded.brain.recipe_admin.delete("acme", "default", "analyze")
        _, w2 = spawn_worker(embedded, worker)
        wait_for(lambda: len(prompts) == 3, timeout=15)
        assert prompts[-1].startswith("You are the tenant analyst.")
        embedded.brain.recipe_admin.delete("acme", None, "analyze")
        _, w3 = spawn_worker(embedded, worker)
        wait_for(lambda: len(prompts) == 4, timeout=15)
        assert "analysis worker in Vancetope" in prompts[-1]  # the bundled one
        assert w3.recipe["source"] == "bundled"
    finally:
        for project in ("default", None):
            with contextlib.suppress(NotFound):  # already deleted by the test
                embedded.brain.recipe_admin.delete("acme", project, "analyze")


def test_a_recipes_tool_changes_decide_what_is_offered_and_callable(embedded):
    offered = []

    def worker(messages, tools):
        offered.append(sorted(t.name for t in tools))
        if len(offered) == 1:
            return LlmResponse("", (call("process_list"),))
        return respond(json.loads(messages[-1].content).get("error", "listed"))

    _put(embedded, "tooled", "default", add="[process_list]")
    try:
        session, w = spawn_worker(embedded, worker)
        wait_for(lambda: embedded.brain.store.port(SessionStore).get_process("acme", w.id).status
                 is ProcessStatus.CLOSED, timeout=15)
        assert offered[0] == ["process_list", "respond"]  # no inbox_post: not a ford default
        assert embedded.brain.store.port(SessionStore).get_process("acme", w.id).engine_state["lastReply"] \
            == "listed"
    finally:
        embedded.brain.recipe_admin.delete("acme", "default", "analyze")
    offered.clear()
    session, w = spawn_worker(embedded, worker)  # bundled analyze: no process_list
    wait_for(lambda: embedded.brain.store.port(SessionStore).get_process("acme", w.id).status
             is ProcessStatus.CLOSED, timeout=15)
    assert offered[0] == ["document_read", "memory_query", "memory_read", "memory_record",
                          "respond"]  # the bundled analyze's own adds (issue 29)
    assert "not in this process's tool pool" in embedded.brain.store.port(SessionStore).get_process(
        "acme", w.id).engine_state["lastReply"]


@pytest.fixture
def curator_tool():
    """A server tool only engines with the role ``curator`` may see (registered for the test)."""
    @server_tool(ToolSpec("curate", "Curate the corpus.", {"type": "object", "properties": {}}),
                 roles=("curator",))
    def curate(context):
        return {"curated": True}
    yield "curate"
    del SERVER_TOOLS["curate"]


@pytest.mark.parametrize(("roles", "offered_tools", "reply"), [
    ("[]", ["respond"], "needs the engine role(s) curator"),
    ("[curator]", ["curate", "respond"], "curated"),
])
def test_a_role_gated_tool_exists_only_for_recipes_with_the_role(embedded, curator_tool, roles,
                                                                   offered_tools, reply):
    """The recipe adds the tool and removes inbox_post either way; only its ``roles`` decide
    whether the role-gated tool is offered, and calling it without the role fails."""
    offered = []

    def worker(messages, tools):
        offered.append(sorted(t.name for t in tools))
        if len(offered) == 1:
            return LlmResponse("", (call("curate"),))
        result = json.loads(messages[-1].content)
        return respond("curated" if result.get("result") == {"curated": True}
                       else result.get("error", "?"))

    _put(embedded, "gated", "default", add="[curate]", remove="[inbox_post]", roles=roles)
    try:
        _, w = spawn_worker(embedded, worker)
        wait_for(lambda: embedded.brain.store.port(SessionStore).get_process("acme", w.id).status
                 is ProcessStatus.CLOSED, timeout=15)
    finally:
        embedded.brain.recipe_admin.delete("acme", "default", "analyze")
    assert offered[0] == offered_tools
    assert reply in embedded.brain.store.port(SessionStore).get_process("acme", w.id).engine_state["lastReply"]
