"""Review rules that can be checked: import boundaries, the layer order of the packages, module
size and the one errors module (STYLE.md 1, 3, 10, 15)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from tests.helpers import import_shipped_modules, shipped_subclasses
from vancetope_brain import errors

ROOT = Path(__file__).resolve().parent.parent
BANNED_IN_BRAIN = ("flask", "flask_sock", "celery", "kombu", "werkzeug", "vancetope_gateway",
                   "workers")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_brain_imports_no_flask_no_celery_and_nothing_above_it():
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imports(path) & set(BANNED_IN_BRAIN))
        for path in (ROOT / "vancetope_brain").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_workers_do_not_import_the_gateway():
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "workers").rglob("*.py")
                 if "vancetope_gateway" in _imports(p)]
    assert offenders == []


def test_the_gateway_reaches_the_store_only_through_services():
    """Persistence is wired in the brain's roots (``vancetope_brain.runtime``); the front door
    imports no store module, so nothing in it can touch a port behind a service's back."""
    offenders = []
    for path in (ROOT / "vancetope_gateway").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{path.relative_to(ROOT)}: {m}" for m in modules
                          if m == "vancetope_brain.store" or m.startswith("vancetope_brain.store.")
                          or isinstance(node, ast.ImportFrom) and m == "vancetope_brain"
                          and any(a.name == "store" for a in node.names)]
    assert offenders == []


def test_every_package_states_its_rule():
    for package in ("vancetope_brain", "vancetope_gateway", "workers"):
        for init in (ROOT / package).rglob("__init__.py"):
            doc = ast.get_docstring(ast.parse(init.read_text()))
            assert doc, f"{init.relative_to(ROOT)} has no docstring stating the package's rule"


def test_modules_stay_small():
    big = {str(p.relative_to(ROOT)): n for pkg in ("vancetope_brain", "vancetope_gateway",
                                                     "workers")
           for p in (ROOT / pkg).rglob("*.py")
           if (n := len(p.read_text().splitlines())) > 800}
    assert big == {}, "split these modules before adding to them (STYLE.md 3)"


def test_every_exception_class_is_in_the_errors_tree():
    import_shipped_modules()
    outside = {f"{c.__module__}.{c.__name__}" for c in shipped_subclasses(BaseException)
               if c.__module__ != errors.__name__}
    # The test doubles' errors must fail a test, not be handled (errors.py says why).
    assert outside == {"vancetope_brain.llm.testing.NetworkBlockedError",
                       "vancetope_brain.llm.testing.ScriptExhausted"}
    tree = errors.__doc__ or ""
    for cls in set(shipped_subclasses(errors.VancetopeError)) - {errors.Signal}:
        assert f" {cls.__name__} " in tree, f"{cls.__name__} is not drawn in errors.py's tree"
        assert (cls.__doc__ or "").startswith("Raised when"), cls.__name__


# ── The layer order (docs/architecture.md, "The parts") ──────────────────────────────────────
# Bottom to top: a unit imports only units on lines below its own; units on one line do not
# import each other. A unit is a sub-package or top-level module of vancetope_brain, or one of
# the two packages above it. Imports under ``if TYPE_CHECKING:`` count: a type is a dependency.
LAYERS = (
    ("errors", "keys"),
    ("config",),
    ("models", "schemas"),
    ("store",),
    ("recipes", "settings"),
    ("llm",),
    ("observability",),
    ("knowledge",),
    ("events", "identity"),
    ("notifications", "tools", "webhooks"),
    ("inbox",),
    ("engines",),
    ("lanes", "sessions"),
    ("services",),
    ("runtime",),
    ("workers",),
    ("vancetope_gateway",),
)
ABOVE_THE_BRAIN = ("workers", "vancetope_gateway")
PROJECT = ("vancetope_brain", *ABOVE_THE_BRAIN)

LAZY_IMPORTS = {
    # (module, imported module): why it is imported inside a function. The CLIs
    # (CLI_MODULES) defer what a command needs until it runs, so ``--help`` starts fast.
    ("vancetope_brain/llm/profiles.py", "vancetope_brain.llm.openai_provider"):
        "only a process that talks to an endpoint pays openai's import (over a second)",
    ("vancetope_brain/store/backend.py", "vancetope_brain.store.sqlite"):
        "a backend package builds on backend.py, and only the opened backend is imported",
    ("vancetope_brain/store/backend.py", "vancetope_brain.store.postgres"):
        "a backend package builds on backend.py; psycopg is imported only to open PostgreSQL",
    ("vancetope_brain/store/backend.py", "vancetope_brain.store.mongo"):
        "a backend package builds on backend.py; pymongo is imported only to open MongoDB",
}
CLI_MODULES = ("vancetope_gateway/cli.py", "vancetope_gateway/admin_cli.py")


def _unit(module: str) -> str:
    """The layer unit of a dotted module name (``vancetope_brain.store.sqlite`` → ``store``)."""
    parts = module.split(".")
    return parts[1] if parts[0] == "vancetope_brain" and len(parts) > 1 else parts[0]


def _project_imports(path: Path, root: Path) -> Iterator[tuple[str, bool, int]]:
    """(imported project module, imported inside a function, line) for each import in
    ``path``; ``from package import module`` yields the module."""
    def walk(node: ast.AST, local: bool) -> Iterator[tuple[str, bool, int]]:
        for child in ast.iter_child_nodes(node):
            inside = local or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                yield from ((a.name, inside, child.lineno) for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                subs = [f"{child.module}.{a.name}" for a in child.names
                        if (root / child.module.replace(".", "/") / a.name).is_dir()
                        or (root / child.module.replace(".", "/") / f"{a.name}.py").exists()]
                yield from ((m, inside, child.lineno) for m in subs or [child.module])
            yield from walk(child, inside)

    tree = ast.parse(path.read_text(), filename=str(path))
    yield from ((m, local, line) for m, local, line in walk(tree, False)
                if m.split(".")[0] in PROJECT)


def import_graph(root: Path = ROOT) -> dict[str, dict[str, list[str]]]:
    """unit → imported unit → the places (``path:line``) that import it."""
    graph: dict[str, dict[str, list[str]]] = {}
    for package in PROJECT:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root)
            source = _unit(".".join(rel.with_suffix("").parts))
            for module, _, line in _project_imports(path, root):
                if (target := _unit(module)) not in (source, "vancetope_brain"):
                    graph.setdefault(source, {}).setdefault(target, []).append(f"{rel}:{line}")
    return graph


def cycles(graph: dict[str, dict[str, list[str]]]) -> list[list[str]]:
    """The strongly connected components of more than one unit (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(unit: str) -> None:
        index[unit] = low[unit] = len(index)
        stack.append(unit)
        for target in graph.get(unit, {}):
            if target not in index:
                visit(target)
                low[unit] = min(low[unit], low[target])
            elif target in stack:
                low[unit] = min(low[unit], index[target])
        if low[unit] == index[unit]:
            component = []
            while (top := stack.pop()) != unit:
                component.append(top)
            if component:
                found.append(sorted([unit, *component]))

    for unit in list(graph):
        if unit not in index:
            visit(unit)
    return sorted(found)


def against_the_order(graph: dict[str, dict[str, list[str]]]) -> dict[tuple[str, str], list[str]]:
    """Every import of a unit on the same line of LAYERS or above the importer's."""
    level = {unit: i for i, line in enumerate(LAYERS) for unit in line}
    return {(source, target): places for source, targets in graph.items()
            for target, places in targets.items() if level[target] >= level[source]}


def lazy_imports(root: Path = ROOT) -> set[tuple[str, str]]:
    """(module, imported module) of every function-local import of a project module."""
    return {(str(path.relative_to(root)), module)
            for package in PROJECT for path in (root / package).rglob("*.py")
            for module, local, _ in _project_imports(path, root) if local
            and str(path.relative_to(root)) not in CLI_MODULES}


def test_layers_name_every_unit():
    units = {p.stem if p.suffix == ".py" else p.name
             for p in (ROOT / "vancetope_brain").iterdir()
             if p.suffix == ".py" and p.stem != "__init__" or (p / "__init__.py").exists()}
    assert sorted(u for line in LAYERS for u in line) == sorted(units | set(ABOVE_THE_BRAIN))


def test_the_architecture_page_draws_the_layers():
    text = (ROOT / "docs" / "architecture.md").read_text()
    rows = re.findall(r"^\| (\d+) \| (.*) \|$", text, flags=re.MULTILINE)
    units = {u for line in LAYERS for u in line}
    drawn = [tuple(n for n in re.findall(r"`([\w/.]+?)/?`", row) if n in units)
             for _, row in sorted(rows, key=lambda r: int(r[0]))]
    assert drawn == list(LAYERS)


def test_packages_import_only_the_layers_below_them():
    assert against_the_order(import_graph()) == {}, "see LAYERS (docs/architecture.md, The parts)"


def test_no_packages_import_each_other_in_a_cycle():
    assert cycles(import_graph()) == []


def test_no_project_module_is_imported_inside_a_function():
    """A function-local import hides a dependency (and a cycle) from the layer check; only
    the CLIs and the named cases of LAZY_IMPORTS may defer one."""
    assert lazy_imports() == set(LAZY_IMPORTS)


def test_the_layer_check_sees_a_back_import_and_a_local_import(tmp_path):
    for package in PROJECT:
        (tmp_path / package).mkdir()
    (tmp_path / "vancetope_brain" / "models").mkdir()
    (tmp_path / "vancetope_brain" / "models" / "bad.py").write_text(
        "from vancetope_brain.lanes import Waker\n"
        "def f():\n    from vancetope_brain import errors\n")
    (tmp_path / "vancetope_brain" / "errors.py").write_text("")
    graph = import_graph(tmp_path)
    assert against_the_order(graph) == {("models", "lanes"): ["vancetope_brain/models/bad.py:1"]}
    assert lazy_imports(tmp_path) == {("vancetope_brain/models/bad.py", "vancetope_brain.errors")}
    graph["lanes"] = {"models": ["x"]}
    assert cycles(graph) == [["lanes", "models"]]
