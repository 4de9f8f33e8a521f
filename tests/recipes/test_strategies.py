"""Strategies are catalogued like recipes: bundled ones load and validate (a broken bundled
file is refused with its field), and tenant/project ones are managed with the admin CLI and
refused, field-named, when invalid."""

from __future__ import annotations

from pathlib import Path

import pytest

from vancetope_brain.errors import RecipeError
from vancetope_brain.models.strategy import CheckpointType, Strategy
from vancetope_brain.recipes.kinds import bundled_of
from vancetope_brain.recipes.loader import BundledDefinitions

pytest_plugins = ["tests.test_admin_cli"]  # its admin and store_url fixtures


def test_every_bundled_strategy_loads_and_one_asks_for_approval() -> None:
    strategies = bundled_of(Strategy).definitions
    assert {"draft-review", "compare-options", "research-brief"} <= set(strategies)
    assert all(s.description for s in strategies.values())
    draft = strategies["draft-review"].phases[1]
    assert draft.checkpoint is not None and draft.checkpoint.type is CheckpointType.APPROVAL


@pytest.mark.parametrize(("text", "error"), [
    ("name: broken\nphases: []\n", "phases: List should have at least 1 item"),
    ("name: broken\nphases:\n  - {name: a, recipe: ford, goal: '{{ phases.a.output }}', "
     "onFail: drfat}\n", "phases.0.onFail: no phase named 'drfat'"),
    ("name: broken\nphases:\n  - {name: a, recipe: ford, goal: g, checkpoint: {type: decision, "
     "title: t}}\n", "phases.0.checkpoint: Value error, a DECISION checkpoint needs options"),
    ("name: broken\nphases:\n  - {name: a, goal: g}\n",
     "phases.0: Value error, a phase needs recipe and goal"),
    ("name: broken\nphases:\n  - {name: a, recipe: ford, goal: g, gate: {all: [{value: x.y, "
     "equals: 1}]}}\n", "must start with input, params or phases"),
])
def test_a_broken_bundled_strategy_is_refused_naming_file_and_field(
        tmp_path: Path, text: str, error: str) -> None:
    (tmp_path / "strategies").mkdir()
    (tmp_path / "strategies" / "broken.yaml").write_text(text)
    catalogue = BundledDefinitions(Strategy, "strategies", tmp_path)  # type: ignore[arg-type]
    with pytest.raises(RecipeError, match="recipes/strategies/broken.yaml: ") as caught:
        _ = catalogue.definitions
    assert error.replace("Value error, ", "") in str(caught.value)


def test_the_admin_cli_puts_shows_lists_and_deletes_strategies(admin, tmp_path: Path) -> None:
    assert admin("tenant", "create", "Acme", "--id", "acme").code == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: mine\nphases:\n  - {name: a, recipe: ford, goal: '{{ nope }}'}\n")
    refused = admin("strategy", "put", "--tenant", "acme", str(bad))
    assert refused.code == 2
    assert f"{bad}: phases.0.goal: template uses unknown variable(s) nope" in refused.err
    good = tmp_path / "mine.yaml"
    good.write_text("name: draft-review\ndescription: mine\nphases:\n"
                    "  - {name: a, recipe: ford, goal: 'A {{ input }}'}\n")
    assert admin("strategy", "put", "--tenant", "acme", str(good)).out == "draft-review\n"
    listed = {row[0]: row[1] for row in admin("strategy", "list", "--tenant", "acme").rows}
    assert listed["draft-review"] == "tenant" and listed["compare-options"] == "bundled"
    shown = admin("strategy", "show", "--tenant", "acme", "draft-review")
    assert shown.out.startswith("name: draft-review\n") and "overrides bundled" in shown.err
    assert admin("strategy", "delete", "--tenant", "acme", "draft-review").code == 0
    assert {r[0]: r[1] for r in admin("strategy", "list", "--tenant", "acme").rows}[
        "draft-review"] == "bundled"


@pytest.mark.parametrize("name", sorted(bundled_of(Strategy).definitions))
@pytest.mark.parametrize("iteration", [1, 2])
def test_every_bundled_strategy_template_renders(name: str, iteration: int) -> None:
    """With every phase run (as a later phase sees them), each goal, title and body renders."""
    from vancetope_brain.models.render import render_text

    strategy = bundled_of(Strategy).definitions[name]
    answer = {"outcome": "DECIDED", "value": {"approved": True, "chosen": "go"},
              "reason": None, "answeredBy": "ada"}
    phases = {p.name: {"status": "done", "output": f"{p.name} output", "payload": None,
                       "iteration": 1, "answer": answer,
                       "branches": {b.name: {"status": "done", "output": "o", "payload": None}
                                    for b in p.fork}}
              for p in strategy.phases}
    variables = {"input": "a launch note", "params": dict(strategy.params), "phases": phases,
                 "iteration": iteration, "strategy": name}
    for i, phase in enumerate(strategy.phases):
        sources = [b.goal for b in phase.branches()]
        if phase.checkpoint is not None:
            sources += [phase.checkpoint.title, phase.checkpoint.body or ""]
        for source in sources:
            assert render_text(f"{name}: phases.{i}", source, variables)
