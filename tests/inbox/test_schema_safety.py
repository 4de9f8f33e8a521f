"""STRUCTURE_EDIT schemas cannot stall a thread (issue 12): patterns run on RE2, RE2-less
syntax and oversized or overdeep schemas are refused when the item is posted, and costly
validations are cut off by a step budget.

Timings are CPU of this thread (``time.thread_time``), printed for the issue's report.
"""

from __future__ import annotations

import json
import time

import pytest

from vancetope_brain import schemas
from vancetope_brain.errors import InvalidInput
from vancetope_brain.identity import Principal
from vancetope_brain.inbox.payloads import validate_answer, validate_payload
from vancetope_brain.models.inbox import ItemStatus, ItemType, NewItem, Outcome

T = ItemType.STRUCTURE_EDIT
EVIL = "^(a+)+$"  # exponential on backtracking engines: 2.26 s for 27 characters with re


def _cpu_ms(action) -> float:
    start = time.thread_time()
    action()
    return (time.thread_time() - start) * 1000


def _refusal(payload) -> str:
    with pytest.raises(InvalidInput) as refused:
        validate_payload(T, payload)
    return str(refused.value)


def _answer_refusal(payload, value) -> str:
    with pytest.raises(InvalidInput) as refused:
        validate_answer(T, payload, {"value": value})
    return str(refused.value)


def test_a_catastrophic_pattern_checks_10000_characters_through_the_inbox_service(embedded):
    inbox, ada = embedded.brain.inbox, Principal("acme", "ada")
    payload = {"schema": {"type": "string", "pattern": EVIL}, "value": "a"}
    item, _ = inbox.create("acme", "ada", NewItem(type=T, title="evil", payload=payload))
    refused_ms = _cpu_ms(lambda: pytest.raises(InvalidInput, inbox.answer, ada, item.id,
                                               Outcome.DECIDED, value={"value": "a" * 9999 + "b"}))
    passed: list = []
    passed_ms = _cpu_ms(lambda: passed.append(inbox.answer(
        ada, item.id, Outcome.DECIDED, value={"value": "a" * 10_000})))
    print(f"\n^(a+)+$ via InboxService: 'a'*9999+'b' refused in {refused_ms:.1f} ms CPU, "
          f"'a'*10000 accepted in {passed_ms:.1f} ms CPU")
    assert passed[0].status is ItemStatus.ANSWERED
    assert refused_ms < 100 and passed_ms < 100


def test_pattern_properties_and_additional_properties_match_on_re2():
    schema = {"type": "object", "patternProperties": {EVIL: {"type": "integer"}},
              "additionalProperties": False}
    payload = {"schema": schema, "value": {}}
    ok, bad_value, extra = {"a" * 10_000: 1}, {"a" * 10_000: "one"}, {"a" * 9999 + "b": 1}
    ms = [_cpu_ms(lambda: validate_answer(T, payload, {"value": ok})),
          _cpu_ms(lambda: _answer_refusal(payload, bad_value)),
          _cpu_ms(lambda: _answer_refusal(payload, extra))]
    print(f"\npatternProperties {EVIL} over 10000-character names: {ms} ms CPU")
    assert "is not of type 'integer'" in _answer_refusal(payload, bad_value)
    assert "'b' does not match any of the regexes: '^(a+)+$'" in _answer_refusal(payload, {"b": 1})
    assert max(ms) < 100


def test_the_regex_format_is_checked_with_re2():
    # The meta-schema checks every pattern with the format "regex": here RE2's parser.
    payload = {"schema": {"type": "string", "format": "regex", "pattern": EVIL}, "value": "a"}
    ms = _cpu_ms(lambda: validate_payload(T, payload))
    print(f"\nformat regex + {EVIL}: checked in {ms:.1f} ms CPU")
    assert ms < 100
    # As before, formats of the value are annotations (jsonschema's default for 2020-12).
    assert validate_answer(T, payload, {"value": "aaa"}) == {"value": "aaa"}


@pytest.mark.parametrize(("schema", "where"), [
    ({"type": "string", "pattern": "^(?=a)"}, "pattern at /pattern"),
    ({"properties": {"a/b": {"pattern": r"(x)\1"}}}, "pattern at /properties/a~1b/pattern"),
    ({"patternProperties": {"(?!x)": {}}}, "patternProperties key '(?!x)' at /patternProperties"),
    ({"$schema": "http://json-schema.org/draft-04/schema#", "patternProperties": {"(?<=x)": {}}},
     "patternProperties key '(?<=x)'"),
])
def test_a_pattern_re2_cannot_take_is_refused_when_posted(schema, where):
    message = _refusal({"schema": schema, "value": None})
    assert where in message and "RE2 syntax" in message


def test_a_lookahead_refuses_the_post_through_the_service(embedded):
    with pytest.raises(InvalidInput, match="pattern at /properties/name/pattern.*RE2 syntax"):
        embedded.brain.inbox.create("acme", "ada", NewItem(type=T, title="lookahead", payload={
            "schema": {"properties": {"name": {"type": "string", "pattern": "^(?!root)"}}},
            "value": {}}))


def _sized(size: int) -> dict:
    schema = {"description": ""}
    schema["description"] = "x" * (size - len(json.dumps(schema, separators=(",", ":"))))
    return schema


def _nested(depth: int, leaf=None) -> dict:
    schema: dict = {} if leaf is None else leaf
    for _ in range(depth - 1):
        schema = {"items": schema}
    return schema


def test_schema_size_depth_and_pattern_caps():
    at_size, over_size = _sized(schemas.MAX_SCHEMA_BYTES), _sized(schemas.MAX_SCHEMA_BYTES + 1)
    assert validate_payload(T, {"schema": at_size, "value": 1})["schema"] == at_size
    assert f"at most {schemas.MAX_SCHEMA_BYTES} allowed (the cap)" in _refusal(
        {"schema": over_size, "value": 1})
    validate_payload(T, {"schema": _nested(schemas.MAX_DEPTH), "value": 1})
    assert f"nested more than {schemas.MAX_DEPTH} levels deep (the cap)" in _refusal(
        {"schema": _nested(schemas.MAX_DEPTH + 1), "value": 1})
    longest = "a" * schemas.MAX_PATTERN_CHARS
    validate_payload(T, {"schema": {"pattern": longest}, "value": longest})
    assert f"at most {schemas.MAX_PATTERN_CHARS} allowed (the cap)" in _refusal(
        {"schema": {"pattern": longest + "a"}, "value": 1})


def test_value_size_and_depth_caps():
    payload = {"schema": {}, "value": None}
    at_size = "x" * (schemas.MAX_VALUE_BYTES - 2)  # two quotes
    assert validate_answer(T, payload, {"value": at_size}) == {"value": at_size}
    assert f"at most {schemas.MAX_VALUE_BYTES} allowed" in _answer_refusal(payload, at_size + "x")
    deep: list = []
    for _ in range(schemas.MAX_DEPTH - 1):
        deep = [deep]
    validate_answer(T, payload, {"value": deep})
    assert "nested more than" in _answer_refusal(payload, [deep])


def test_unique_items_is_linear():
    payload = {"schema": {"uniqueItems": True}, "value": []}
    distinct = [{"a": i} for i in range(5000)]  # unsortable: jsonschema compared pairwise, 36 s
    ms = _cpu_ms(lambda: validate_answer(T, payload, {"value": distinct}))
    print(f"\nuniqueItems over 5000 objects: {ms:.1f} ms CPU")
    assert ms < 100
    assert "non-unique" in _answer_refusal(payload, [{"a": 1, "b": [2]}, {"b": [2.0], "a": 1}])
    validate_answer(T, payload, {"value": [1, True, 0, False]})  # booleans are no numbers


def test_a_schema_whose_branches_double_is_cut_off_by_the_step_budget():
    # 18 levels of anyOf over two $refs to the next: 2^18 paths in 1.3 KB (30 s before).
    defs = {f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
            for i in range(18)}
    schema = {"$defs": {**defs, "d18": {"type": "string"}}, "$ref": "#/$defs/d0"}
    message: list[str] = []
    ms = _cpu_ms(lambda: message.append(_refusal({"schema": schema, "value": 1})))
    print(f"\ndoubling anyOf/$ref schema refused after {schemas.MAX_STEPS} steps in "
          f"{ms:.1f} ms CPU")
    assert f"more than {schemas.MAX_STEPS} steps (the cap)" in message[0]
    assert ms < 1000  # cut off: it took 30 s unbounded; the budget is sized for 100–200 ms


def test_unevaluated_properties_next_to_pattern_properties_is_refused():
    message = _refusal({"schema": {"patternProperties": {"^x": {}},
                                   "unevaluatedProperties": False}, "value": {}})
    assert "unevaluatedProperties cannot be combined with patternProperties" in message
    validate_payload(T, {"schema": {"properties": {"x": {}}, "unevaluatedProperties": False},
                         "value": {"x": 1}})
