"""JSON Schemas that users and models send (STRUCTURE_EDIT items), run so none can stall a thread.

jsonschema matches ``pattern``, ``patternProperties`` (and the names ``additionalProperties``
weeds out) with Python's ``re``, which backtracks and holds the GIL while it does:
``^(a+)+$`` against 27 characters took 2.26 s of CPU and stalled every other thread of the
gateway. Here every draft's validator is extended (``jsonschema.validators.extend``) so that

- those keywords and the ``regex`` format run on RE2, which matches in linear time. RE2 has no
  lookaround and no backreferences; a schema using them is refused when it is checked, naming
  the JSON pointer of the pattern;
- ``uniqueItems`` is linear (jsonschema compares unsortable items pairwise: 36 s for 6,000);
- each validation has a budget of ``MAX_STEPS`` (a keyword evaluation costs 1 plus the length of
  its list or object value), so a small schema whose ``anyOf``/``$ref`` branches double at every
  level (2^18 in 1.3 KB: 30 s) is refused instead of run;
- schemas, patterns and values have the size and depth caps below.

``unevaluatedProperties`` is refused next to ``patternProperties``: jsonschema matches the
patterns it consults with ``re`` deep inside its own helpers. Remote ``$ref`` are never fetched
(an empty registry), and error messages stay short.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

import re2
from jsonschema import FormatChecker, ValidationError
from jsonschema.exceptions import SchemaError, best_match
from jsonschema.protocols import Validator
from jsonschema.validators import (
    Draft3Validator,
    Draft4Validator,
    Draft6Validator,
    Draft7Validator,
    Draft201909Validator,
    Draft202012Validator,
    extend,
    validator_for,
)
from referencing import Registry
from referencing.exceptions import Unresolvable

MAX_SCHEMA_BYTES = 64 * 1024
"""Largest schema, as compact JSON."""
MAX_VALUE_BYTES = 64 * 1024
"""Largest value checked against a schema, as compact JSON (one WebSocket frame by default)."""
MAX_DEPTH = 32
"""Deepest nesting of objects and arrays in a schema or in a value."""
MAX_PATTERN_CHARS = 1_000
"""Longest ``pattern`` or ``patternProperties`` key."""
MAX_STEPS = 10_000
"""Keyword evaluations one validation may cost (each 1 + the length of its list/object value):
100–200 ms of CPU at worst on a 2-core test machine (pure Python, so other threads keep
getting the GIL meanwhile), far more than a form needs."""
RE2_MAX_MEM = 2 << 20
"""Bytes RE2 may use for one compiled pattern; a pattern that needs more is refused."""

_RE2 = re2.Options()
_RE2.max_mem = RE2_MAX_MEM
_RE2.longest_match = False  # leftmost-first, as ECMA-262 and Python match
_RE2.log_errors = False  # the refusal names the pattern; nothing for stderr


_budget: ContextVar[list[int]] = ContextVar("schema_steps")


def check(schema: dict[str, Any], value: Any) -> None:
    """Raise ``ValueError`` when ``schema`` is no acceptable JSON Schema or ``value`` breaks it.

    The message names the cap, the pattern's JSON pointer or the value's JSON path.
    """
    _check_size("schema", schema, MAX_SCHEMA_BYTES)
    _check_size("value", value, MAX_VALUE_BYTES)
    validator = _validator(schema)
    token = _budget.set([MAX_STEPS])
    try:
        error = best_match(validator.iter_errors(value))
    except Unresolvable as e:
        raise ValueError(f"schema: cannot resolve $ref {e.ref!r} (only references within "
                         "this schema are followed)") from e
    except re2.error as e:
        raise ValueError(f"schema: {e}") from e
    except RecursionError as e:
        raise ValueError("schema: its $ref recursion runs too deep for this value") from e
    finally:
        _budget.reset(token)
    if error is not None:
        raise ValueError(f"value at {error.json_path}: {_shortened(error.message)}")


def _validator(schema: dict[str, Any]) -> Validator:
    dialect = schema.get("$schema")
    if dialect is not None and not isinstance(dialect, str):
        raise ValueError("schema: $schema must be a URI string")
    found = validator_for(schema, default=Draft202012Validator)
    cls = _EXTENDED.get(found) or _EXTENDED[Draft202012Validator]  # another library's draft
    try:
        cls.check_schema(schema, format_checker=cls.FORMAT_CHECKER)
    except SchemaError as e:
        if isinstance(e.cause, re2.error):
            raise ValueError(f"schema: {_pointer(e)}: {e.cause}") from e
        raise ValueError(f"schema is not a valid JSON Schema: at {e.json_path}: "
                         f"{_shortened(e.message)}") from e
    names = _pattern_property_names(schema)
    for name in names:  # the draft 3 and 4 meta-schemas do not check them
        try:
            _regex(name)
        except re2.error as e:
            raise ValueError(f"schema: patternProperties key {_shortened(repr(name), 80)}: "
                             f"{e}") from e
    if names and _uses_unevaluated(schema):
        raise ValueError("schema: unevaluatedProperties cannot be combined with "
                         "patternProperties here; use additionalProperties instead")
    return cls(schema, registry=Registry())  # empty: the default would fetch remote $refs


def _check_size(what: str, data: Any, limit: int) -> None:
    if nested_deeper(data, MAX_DEPTH):
        raise ValueError(f"{what} is nested more than {MAX_DEPTH} levels deep (the cap)")
    size = len(json.dumps(data, separators=(",", ":")))
    if size > limit:
        raise ValueError(f"{what} has {size} bytes as JSON; at most {limit} allowed (the cap)")


def nested_deeper(value: Any, limit: int) -> bool:
    """Whether arrays and objects in a JSON value nest more than ``limit`` levels deep
    (iteratively: a value nested past Python's recursion limit is answered too)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else \
            item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _pattern_property_names(data: Any) -> list[str]:
    """Every ``patternProperties`` key, wherever it is (a ``$ref`` may reach any place)."""
    if isinstance(data, list):
        return [name for child in data for name in _pattern_property_names(child)]
    if not isinstance(data, dict):
        return []
    found = list(data["patternProperties"]) if isinstance(data.get("patternProperties"),
                                                          dict) else []
    return found + [name for child in data.values() for name in _pattern_property_names(child)]


def _uses_unevaluated(data: Any) -> bool:
    if isinstance(data, dict):
        return "unevaluatedProperties" in data or any(map(_uses_unevaluated, data.values()))
    return isinstance(data, list) and any(map(_uses_unevaluated, data))


def _pointer(error: SchemaError) -> str:
    """The JSON pointer of the refused pattern (a ``patternProperties`` key: of its object)."""
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in error.path]
    where = "/" + "/".join(parts)
    if parts and parts[-1] == "patternProperties":
        return f"patternProperties key {_shortened(repr(error.instance), 80)} at {where}"
    return f"pattern at {where}"


# --- RE2 -----------------------------------------------------------------------------------


def _regex(pattern: str) -> Any:
    """The compiled pattern (``re2.compile`` keeps an LRU cache of 128); ``re2.error`` if RE2
    cannot take it."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise re2.error(f"has {len(pattern)} characters; at most {MAX_PATTERN_CHARS} allowed "
                        "(the cap)")
    try:
        return re2.compile(pattern, _RE2)
    except re2.error as e:
        detail = e.args[0].decode(errors="replace") if e.args and isinstance(e.args[0], bytes) \
            else str(e)
        raise re2.error(f"{detail}; patterns must be RE2 syntax (no lookaround such as (?=, "
                        "no backreferences such as \\1)") from None


def _matches(pattern: str, text: str) -> bool:
    try:
        regex = _regex(pattern)
    except re2.error as e:  # where the meta-schema does not look, e.g. reached by $ref
        raise re2.error(f"pattern {_shortened(repr(pattern), 80)}: {e}") from None
    try:
        return regex.search(text) is not None
    except UnicodeEncodeError:  # a lone surrogate; JSON frames cannot carry one, models can
        return False


def _is_re2(instance: object) -> bool:
    if isinstance(instance, str):
        _regex(instance)
    return True


# --- keywords --------------------------------------------------------------------------------

_Keyword = Callable[[Validator, Any, Any, dict[str, Any]], Iterator[ValidationError] | None]


def _spend(steps: int) -> None:
    left = _budget.get()
    left[0] -= steps
    if left[0] < 0:  # a ValueError passes through jsonschema to check()'s caller
        raise ValueError(f"schema: checking this value takes more than {MAX_STEPS} steps "
                         "(the cap); simplify the schema (fewer nested anyOf/oneOf/$ref "
                         "branches, shorter enum lists) or the value")


def _counted(keyword: _Keyword) -> _Keyword:
    def counted(validator: Validator, value: Any, instance: Any,
                schema: dict[str, Any]) -> Iterator[ValidationError] | None:
        _spend(1 + (len(value) if isinstance(value, dict | list) else 0))
        return keyword(validator, value, instance, schema)
    return counted


def _pattern(validator: Validator, pattern: str, instance: Any,
             schema: dict[str, Any]) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _matches(pattern, instance):
        yield ValidationError(f"{_shortened(repr(instance), 80)} does not match "
                              f"{_shortened(repr(pattern), 200)}")


def _pattern_properties(validator: Validator, patterns: dict[str, Any], instance: Any,
                        schema: dict[str, Any]) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    _spend(len(patterns) * len(instance))
    for pattern, subschema in patterns.items():
        for name, value in instance.items():
            if _matches(pattern, name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional_properties(validator: Validator, additional: Any, instance: Any,
                           schema: dict[str, Any]) -> Iterator[ValidationError]:
    """jsonschema's keyword, with the names matched on RE2."""
    if not validator.is_type(instance, "object"):
        return
    patterns = list(schema.get("patternProperties", {}))
    _spend(len(patterns) * len(instance))
    properties = schema.get("properties", {})
    extras = [name for name in instance if name not in properties
              and not any(_matches(pattern, name) for pattern in patterns)]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        joined = ", ".join(repr(extra) for extra in sorted(extras))
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            listed = ", ".join(repr(pattern) for pattern in sorted(patterns))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {listed}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({joined} {verb} "
                                  "unexpected)")


def _unique_items(validator: Validator, unique: Any, instance: Any,
                  schema: dict[str, Any]) -> Iterator[ValidationError]:
    if not unique or not validator.is_type(instance, "array"):
        return
    _spend(len(instance))
    seen: set[str] = set()
    for item in instance:
        key = json.dumps(_canonical(item), sort_keys=True)
        if key in seen:
            yield ValidationError(f"{instance!r} has non-unique elements")
            return
        seen.add(key)


def _canonical(value: Any) -> Any:
    """Equal JSON values the same (1 == 1.0, key order ignored), true apart from 1."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {name: _canonical(child) for name, child in value.items()}
    if isinstance(value, list):
        return [_canonical(child) for child in value]
    return value


_REPLACED: dict[str, _Keyword] = {
    "pattern": _pattern, "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties, "uniqueItems": _unique_items}


def _extended(base: type[Validator]) -> type[Validator]:
    checker = FormatChecker(formats=())
    checker.checkers = dict(base.FORMAT_CHECKER.checkers)
    checker.checks("regex", raises=re2.error)(_is_re2)
    keywords = {name: _counted(_REPLACED.get(name, keyword))
                for name, keyword in base.VALIDATORS.items()}
    return extend(base, keywords, format_checker=checker)


_EXTENDED: dict[type[Validator], type[Validator]] = {
    base: _extended(base) for base in (Draft3Validator, Draft4Validator, Draft6Validator,
                                       Draft7Validator, Draft201909Validator,
                                       Draft202012Validator)}


def _shortened(message: str, limit: int = 300) -> str:
    """jsonschema quotes whole instances in messages; keep error replies small."""
    return message if len(message) <= limit else message[:limit] + "…"
