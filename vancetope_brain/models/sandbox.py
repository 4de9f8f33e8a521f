"""The bounded Jinja2 sandbox every recipe, strategy and template renders in (issue 12).

Jinja's ``ImmutableSandboxedEnvironment`` keeps a template away from Python's
internals, not from the CPU or the memory: ``7**(5*10**6)`` was folded while
compiling, ``'x' * 10**9`` builds a gigabyte, two nested ``range`` loops run
10¹⁰ times. Here:

- Nothing a template computes runs at compile time: ``optimized=False``, a
  context-passing ``finalize`` (so Jinja folds no output), and ``check_template``'s
  introspection runs without the optimizer (``variables_of``).
- Every operator, filter and method that can build a large value checks the
  size of its result *before* computing it (``MAX_TEXT``, ``MAX_ITEMS``,
  ``MAX_INT_BITS``); str methods are an allowlist, as are the methods of ints,
  lists and dicts (``int.to_bytes(10**9)`` is not on it).
- A render spends a ``RenderBudget``: CPU time, loop iterations, calls, call
  depth and characters built. Every loop iteration charges it (``compile``
  routes each ``{% for %}`` through a filter no template can name), and so do
  every call, every printed piece of text (literal text included, inside macros
  and ``{% set %}`` blocks too) and every value an operator or filter builds.

An overrun raises ``RenderBudgetExceeded`` naming the bound; ``render`` turns it into a
``RecipeError``. Templates render only inside ``budget()``: a hook that finds no
budget raises rather than run unbounded.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import math
import re
import string
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import BuiltinMethodType, MethodWrapperType
from typing import Any

from jinja2 import filters, nodes, pass_context, pass_environment, pass_eval_context
from jinja2.exceptions import FilterArgumentError
from jinja2.meta import TrackingCodeGenerator
from jinja2.runtime import Context, LoopContext
from jinja2.sandbox import MAX_RANGE, ImmutableSandboxedEnvironment, SecurityError
from jinja2.visitor import NodeTransformer

from vancetope_brain.errors import RenderBudgetExceeded
from vancetope_brain.models.markup import tagged

MAX_RENDER_SECONDS = 0.05
"""CPU time one render may take (the rendering thread's CPU, ``time.thread_time``, less what
the garbage collector spent in that thread meanwhile and, under gevent, what the other
greenlets spent on it while the render yielded). CPU rather
than wall time: a busy server (other threads holding the GIL) must not fail a legitimate
render, and what a runaway template burns is CPU. A bundled prompt renders in well under 1 ms;
checked at every loop iteration, call, printed text and built value."""

MAX_ITERATIONS = 10_000
"""Loop iterations one render may run, all ``{% for %}`` loops together (nested loops
multiply: ``range`` alone caps one loop at 100,000)."""

MAX_CALLS = 10_000
"""Calls one render may make: macros, ``caller()``, methods, ``range``, ``loop.cycle`` …"""

MAX_CALL_DEPTH = 50
"""How deep calls may nest (a recursive macro stops here)."""

MAX_TEXT = 1_000_000
"""Longest string a render may build (one value, or the rendered text), in characters."""

MAX_ITEMS = MAX_RANGE
"""Longest list or tuple an operator or filter may build (Jinja's ``range`` cap, 100,000)."""

MAX_BUILT = 4_000_000
"""Characters (and list items) one render may build in all: every printed piece of text,
inside macros and ``{% set %}`` blocks too, and every value built by an operator, filter or
method. Bounds the memory of a render."""

MAX_INT_BITS = 4096
"""Largest integer an operator may build, in bits (about 1,230 decimal digits)."""

MAX_JSON_INDENT = 8
"""Largest ``indent`` of the ``tojson`` filter."""

MAX_TEMPLATE_TOKENS = 2000
"""Tokens one template may have (a name, an operator, a run of literal text …; whitespace
inside tags does not count), checked while
lexing, before the template is parsed: parsing and compiling cost about 30 µs per token, so a
template of dense tags would stall its request thread. Bundled prompts have under 100."""

_DROPPED_FILTERS = frozenset({"urlize", "pprint"})
"""Filters a template cannot use: slow on large values and of no use in a prompt."""


YIELD_EVERY_SECONDS = 0.002
"""A render that has run this much CPU since it last did lets the other threads of the process
run (a short sleep releases the GIL), so a long render delays another request by about this
much, not by Python's 5 ms switch interval for each of its hand-offs. Legitimate renders
finish long before."""

_YIELD_SLEEP = 0.0001


_gc = threading.local()


def _gc_cpu() -> float:
    """CPU seconds this thread has spent in the garbage collector (``gc.callbacks``)."""
    return getattr(_gc, "spent", 0.0)


def _count_gc(phase: str, info: dict[str, int]) -> None:
    # A full collection can take tens of ms in a big process: it runs in whichever thread
    # allocated last, so it is not the template's CPU.
    try:
        if phase == "start":
            _gc.started = time.thread_time()
        elif hasattr(_gc, "started"):
            _gc.spent = _gc_cpu() + time.thread_time() - _gc.started
    except RuntimeError:  # gevent: a collection while a greenlet is finalized has no local
        pass


gc.callbacks.append(_count_gc)


@dataclass
class RenderBudget:
    """What one render has spent. ``tick`` checks the CPU deadline (and yields the GIL now
    and then)."""

    started: float = field(default_factory=time.thread_time)
    gc_at_start: float = field(default_factory=_gc_cpu)
    iterations: int = 0
    calls: int = 0
    depth: int = 0
    built: int = 0
    yielded: float = 0.0
    others: float = 0.0
    """CPU of this OS thread while the render slept to yield: under gevent the other greenlets
    run on the render's thread then, and their CPU is not the template's."""

    def tick(self) -> None:
        spent = (time.thread_time() - self.started - (_gc_cpu() - self.gc_at_start)
                 - self.others)
        if spent > MAX_RENDER_SECONDS:
            raise RenderBudgetExceeded(f"more than {MAX_RENDER_SECONDS * 1000:.0f} ms of CPU")
        if spent - self.yielded > YIELD_EVERY_SECONDS:
            self.yielded = spent
            before = time.thread_time()
            time.sleep(_YIELD_SLEEP)
            self.others += time.thread_time() - before

    def build(self, size: int) -> None:
        self.built += size
        if self.built > MAX_BUILT:
            raise RenderBudgetExceeded(f"more than {MAX_BUILT:,} characters built")
        self.tick()


_BUDGET: ContextVar[RenderBudget] = ContextVar("vancetope_render_budget")


@contextlib.contextmanager
def budget() -> Iterator[RenderBudget]:
    """A fresh budget for the renders in this block (one template render, normally)."""
    token = _BUDGET.set(RenderBudget())
    try:
        yield _BUDGET.get()
    finally:
        _BUDGET.reset(token)


def _spent() -> RenderBudget:
    try:
        return _BUDGET.get()
    except LookupError:
        raise RuntimeError("a recipe template renders only inside sandbox.budget()") from None


# ── sizes, checked before a value is built ───────────────────────────────────────────
def _text(size: int) -> None:
    if size > MAX_TEXT:
        raise RenderBudgetExceeded(f"a string of {size:,} characters (at most {MAX_TEXT:,})")


def _items(size: int) -> None:
    if size > MAX_ITEMS:
        raise RenderBudgetExceeded(f"a list of {size:,} items (at most {MAX_ITEMS:,})")


def _count(value: Any) -> int:
    """An int argument that sizes a result (a width, a count); anything else is left to the
    function to refuse."""
    return value if isinstance(value, int) else 0


def _charge(value: Any) -> Any:
    """Count a value just built against the budget; returns it."""
    if isinstance(value, str):
        _text(len(value))
        _spent().build(len(value))
    elif isinstance(value, list | tuple):
        _items(len(value))
        _spent().build(len(value))
    else:
        _spent().tick()
    return value


def _longest(values: Iterable[Any]) -> int:
    return max((len(str(v)) for v in values), default=0)


_PERCENT = re.compile(r"%(?:\([^)]*\))?[#0 +-]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?.")
_FLOAT_DIGITS = 400
"""Slack per conversion for ``%f`` of a large float (1e308 has 309 digits)."""


def _percent_size(fmt: str, args: Any) -> int:
    """An upper bound of ``fmt % args``; refuses ``*`` widths and widths above ``MAX_TEXT``."""
    specs = _PERCENT.findall(fmt)
    if any("*" in (width, precision) for width, precision in specs):
        raise RenderBudgetExceeded("'*' widths in % formatting")
    widest = max((int(n or 0) for spec in specs for n in spec), default=0)
    _text(widest)
    values = args.values() if isinstance(args, Mapping) else (
        args if isinstance(args, tuple) else (args,))
    return len(fmt) + len(specs) * (_longest(values) + widest + _FLOAT_DIGITS)


def _format_size(fmt: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> int:
    """An upper bound of ``fmt.format(*args, **kwargs)``."""
    fields = [spec or "" for _, name, spec, _ in string.Formatter().parse(fmt) if name is not None]
    if any("{" in spec for spec in fields):
        raise RenderBudgetExceeded("nested fields in a format spec")
    widest = max((int(n) for spec in fields for n in re.findall(r"\d+", spec)), default=0)
    _text(widest)
    return len(fmt) + len(fields) * (_longest([*args, *kwargs.values()]) + widest
                                     + _FLOAT_DIGITS)


def _replaced_size(s: str, old: str, new: str, count: int | None) -> int:
    found = s.count(old) if old else len(s) + 1
    if count is not None and count >= 0:
        found = min(found, count)
    return len(s) + found * (len(new) - len(old))


def _binop_size(operator: str, left: Any, right: Any) -> None:
    """Refuse ``left <operator> right`` if its result would pass a size bound."""
    sequences = (str, list, tuple)
    if operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
        if abs(left) > 1 and right * math.log2(abs(left)) > MAX_INT_BITS:
            raise RenderBudgetExceeded(f"an integer of more than {MAX_INT_BITS} bits")
    elif operator == "*":
        if isinstance(right, sequences) and isinstance(left, int):
            left, right = right, left
        if isinstance(left, sequences) and isinstance(right, int):
            (_text if isinstance(left, str) else _items)(len(left) * max(right, 0))
        elif isinstance(left, int) and isinstance(right, int) and \
                left.bit_length() + right.bit_length() > MAX_INT_BITS:
            raise RenderBudgetExceeded(f"an integer of more than {MAX_INT_BITS} bits")
    elif operator == "+" and isinstance(left, sequences) and type(left) is type(right):
        (_text if isinstance(left, str) else _items)(len(left) + len(right))
    elif operator == "%" and isinstance(left, str):
        _text(_percent_size(left, right))


# ── calls: str methods and the methods of plain data are allowlists ──────────────────
_STR_METHODS = frozenset({
    "capitalize", "casefold", "count", "endswith", "find", "index", "isalnum", "isalpha",
    "isascii", "isdecimal", "isdigit", "isidentifier", "islower", "isnumeric", "isprintable",
    "isspace", "istitle", "isupper", "lower", "lstrip", "partition", "removeprefix",
    "removesuffix", "rfind", "rindex", "rpartition", "rsplit", "rstrip", "split", "splitlines",
    "startswith", "strip", "swapcase", "title", "upper",
    # these can grow their string: sized by _str_call_size first
    "center", "ljust", "rjust", "zfill", "expandtabs", "replace", "join", "format", "format_map",
})
"""The str methods a template may call."""

_DATA_METHODS = frozenset({"get", "keys", "values", "items", "index", "count", "copy",
                           "bit_length", "is_integer"})
"""The methods of other built-in values (dicts, lists, numbers …) a template may call."""


def _str_call_size(s: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    if name in ("center", "ljust", "rjust", "zfill"):
        return max(len(s), _count(args[0] if args else kwargs.get("width")))
    if name == "expandtabs":
        size = _count(args[0] if args else kwargs.get("tabsize", 8))
        return len(s) + s.count("\t") * size
    if name == "replace" and len(args) >= 2 and isinstance(args[0], str) and \
            isinstance(args[1], str):
        count = args[2] if len(args) > 2 else kwargs.get("count", -1)
        return _replaced_size(s, args[0], args[1], count if isinstance(count, int) else None)
    if name == "join" and args:
        parts = [str(p) for p in args[0]]
        _items(len(parts))
        return sum(map(len, parts)) + len(s) * max(len(parts) - 1, 0)
    if name == "format":
        return _format_size(s, args, kwargs)
    if name == "format_map" and args and isinstance(args[0], Mapping):
        return _format_size(s, (), args[0])
    return len(s)


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The immutable sandbox with this module's bounds (see the module docstring). Compiled
    templates iterate every loop through the budget."""

    intercepted_binops = frozenset({"**", "*", "+", "%"})

    def __init__(self, **options: Any) -> None:
        super().__init__(optimized=False, finalize=_printed, **options)
        del self.globals["lipsum"]  # lipsum(10**9) builds paragraphs without a call per word
        bounded = {name: _charged(f) for name, f in self.filters.items()
                   if name not in _DROPPED_FILTERS}
        self.filters = {**bounded, **_SIZED_FILTERS, _LOOP: _loop, _CONCAT: _concat}

    def compile(self, source: Any, name: str | None = None, filename: str | None = None,
                raw: bool = False, defer_init: bool = False) -> Any:
        if isinstance(source, str):
            source = self.parse(source, name, filename)
        return super().compile(_Bounding().visit(source), name, filename,  # type: ignore[call-overload]
                               raw, defer_init)

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        _binop_size(operator, left, right)
        return _charge(super().call_binop(context, operator, left, right))

    def call(__self, __context: Context, __obj: Any, *args: Any,  # noqa: N805 - Jinja's
             **kwargs: Any) -> Any:
        spent = _spent()
        spent.calls += 1
        if spent.calls > MAX_CALLS:
            raise RenderBudgetExceeded(f"more than {MAX_CALLS:,} calls")
        target = getattr(__obj, "__wrapped__", __obj)  # str.format comes wrapped
        owner, name = getattr(target, "__self__", None), getattr(target, "__name__", "")
        if isinstance(owner, str):
            if name not in _STR_METHODS:
                raise SecurityError(f"str.{name} is not allowed in templates")
            if name == "join" and args:  # sized first, so an iterator must not be used up
                args = (list(args[0]), *args[1:])
            _text(_str_call_size(owner, name, args, kwargs))
        elif isinstance(target, BuiltinMethodType | MethodWrapperType) and \
                name not in _DATA_METHODS:
            raise SecurityError(f"{type(owner).__name__}.{name} is not allowed in templates")
        if isinstance(__obj, LoopContext) and args:  # a recursive loop's next level
            args = (_loop(args[0]), *args[1:])
        spent.depth += 1
        try:
            if spent.depth > MAX_CALL_DEPTH:
                raise RenderBudgetExceeded(f"calls nested more than {MAX_CALL_DEPTH} deep")
            return _charge(super().call(__context, __obj, *args, **kwargs))
        finally:
            spent.depth -= 1


# ── the parsed template, rewritten so that loops and ~ spend the budget ──────────────
_LOOP = "(bounded loop)"
_CONCAT = "(bounded concat)"
"""Filters the rewrite inserts; a space in the name keeps templates from naming them."""


class _Bounding(NodeTransformer):
    """``{% for x in it %}`` iterates ``it|(bounded loop)``; ``a ~ b`` is
    ``[a, b]|(bounded concat)``; literal text is a constant, so it is printed (and charged)
    through ``finalize`` like any other output."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        loop = self.generic_visit(node)
        assert isinstance(loop, nodes.For)
        loop.iter = nodes.Filter(loop.iter, _LOOP, [], [], None, None, lineno=loop.lineno)
        return loop

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        concat = self.generic_visit(node)
        assert isinstance(concat, nodes.Concat)
        return nodes.Filter(nodes.List(concat.nodes, lineno=concat.lineno), _CONCAT, [], [],
                            None, None, lineno=concat.lineno)

    def visit_TemplateData(self, node: nodes.TemplateData) -> nodes.Const:
        return nodes.Const(node.data, lineno=node.lineno)


def _loop(iterable: Any) -> Iterator[Any]:
    spent = _spent()
    for item in iterable:
        spent.iterations += 1
        if spent.iterations > MAX_ITERATIONS:
            raise RenderBudgetExceeded(f"more than {MAX_ITERATIONS:,} loop iterations")
        spent.tick()
        yield item


def _concat(parts: list[Any]) -> str:
    texts = [str(p) for p in parts]
    _text(sum(map(len, texts)))
    return _charge("".join(texts))


@pass_context
def _printed(context: Context, value: Any) -> str:
    """``finalize``: every printed piece of text is charged (and, being context-passing,
    keeps Jinja from folding output at compile time)."""
    text = str(value)
    _text(len(text))
    _spent().build(len(text))
    return text


def variables_of(environment: BoundedEnvironment, tree: nodes.Template) -> set[str]:
    """``jinja2.meta.find_undeclared_variables`` without its optimizer (which would fold
    constant expressions, i.e. run template code, while checking a template)."""
    generator = TrackingCodeGenerator(environment)
    generator.optimizer = None
    generator.visit(tree)
    return generator.undeclared_identifiers


# ── filters: every result charged; the ones that can grow a value sized first ────────
def _charged(f: Any) -> Any:
    @functools.wraps(f)  # keeps Jinja's pass_context/… marker
    def charged(*args: Any, **kwargs: Any) -> Any:
        return _charge(f(*args, **kwargs))
    return charged


def _center(value: Any, width: int = 80) -> str:
    _text(max(len(str(value)), _count(width)))
    return _charge(filters.do_center(value, width))


def _indent(s: Any, width: int | str = 4, first: bool = False, blank: bool = False) -> str:
    text = str(s)
    per_line = len(width) if isinstance(width, str) else _count(width)
    _text(per_line)
    _text(len(text) + (text.count("\n") + 1) * per_line)
    return _charge(filters.do_indent(s, width, first, blank))


@pass_environment
def _wordwrap(environment: Any, s: Any, width: int = 79, break_long_words: bool = True,
              wrapstring: str | None = None, break_on_hyphens: bool = True) -> str:
    text, joint = str(s), wrapstring if wrapstring is not None else environment.newline_sequence
    lines = 2 * len(text) // max(_count(width), 1) + text.count("\n") + 1
    _text(len(text) + lines * len(str(joint)))
    return _charge(filters.do_wordwrap(environment, s, width, break_long_words, wrapstring,
                                       break_on_hyphens))


@pass_eval_context
def _replace(eval_ctx: Any, s: Any, old: Any, new: Any, count: int | None = None) -> str:
    _text(_replaced_size(str(s), str(old), str(new), count))
    return _charge(filters.do_replace(eval_ctx, s, old, new, count))


def _format(value: Any, *args: Any, **kwargs: Any) -> str:
    _text(_percent_size(str(value), kwargs or args))
    return _charge(filters.do_format(value, *args, **kwargs))


def _batch(value: Any, linecount: int, fill_with: Any = None) -> Iterator[list[Any]]:
    _items(_count(linecount))
    return filters.do_batch(value, linecount, fill_with)


def _slice(value: Any, slices: int, fill_with: Any = None) -> Iterator[list[Any]]:
    _items(_count(slices))
    return filters.sync_do_slice(value, slices, fill_with)


@pass_eval_context
def _join(eval_ctx: Any, value: Any, d: str = "", attribute: Any = None) -> str:
    items = list(value)
    _items(len(items))
    if attribute is not None:
        items = list(map(filters.make_attrgetter(eval_ctx.environment, attribute), items))
    _text(sum(len(str(i)) for i in items) + len(str(d)) * max(len(items) - 1, 0))
    return _charge(filters.sync_do_join(eval_ctx, items, d))


@pass_eval_context
def _tojson(eval_ctx: Any, value: Any, indent: int | None = None) -> str:
    if indent is not None and (not isinstance(indent, int) or indent > MAX_JSON_INDENT):
        raise RenderBudgetExceeded(f"tojson indent above {MAX_JSON_INDENT}")
    return _charge(filters.do_tojson(eval_ctx, value, indent))


@pass_environment
def _sum(environment: Any, iterable: Any, attribute: Any = None, start: Any = 0) -> Any:
    """Numbers only: a sum of lists or strings is quadratic."""
    items = iterable if attribute is None else map(
        filters.make_attrgetter(environment, attribute), iterable)
    total = start
    for item in items:
        if not isinstance(item, int | float) or not isinstance(total, int | float):
            raise RenderBudgetExceeded("sum adds numbers only")
        total += item
        _spent().tick()
    return total


_TAG = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")


def _tagged(value: Any, tag: str) -> str:
    """``{{ phases.research.output | tagged("findings") }}``: another process's text inside a
    tag, escaped (``models.markup.tagged``), so nothing in it can end the tag."""
    if not isinstance(tag, str) or not _TAG.fullmatch(tag):
        raise FilterArgumentError(f"tagged: the tag is a lowercase-kebab name, not {tag!r}")
    text = str(value)
    _text(len(text) + 4 * text.count("&") + 3 * (text.count("<") + text.count(">"))
          + 2 * len(tag) + 5)
    return _charge(tagged(tag, text))


_SIZED_FILTERS = {"center": _center, "indent": _indent, "wordwrap": _wordwrap,
                  "replace": _replace, "format": _format, "batch": _batch, "slice": _slice,
                  "join": _join, "tojson": _tojson, "sum": _sum, "tagged": _tagged}
"""The filters that can grow a value, checked before they compute it."""
