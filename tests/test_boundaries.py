"""Review rules that can be checked: import boundaries, module size and the one errors module
(STYLE.md 1, 3, 10, 15)."""

from __future__ import annotations

import ast
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
