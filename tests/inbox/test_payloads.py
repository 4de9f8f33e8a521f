"""Payload and answer rules of every Inbox item type (user-interaction.txt §4, §6, §7)."""

from __future__ import annotations

from typing import Any

import pytest

from vancetope_brain.errors import InvalidInput
from vancetope_brain.inbox.payloads import (
    _PAYLOADS,
    default_answer,
    validate_answer,
    validate_payload,
)
from vancetope_brain.models.inbox import ItemType as T

DECISION = {"options": [{"value": "a", "label": "A"}, {"value": "b", "label": "B",
                                                        "description": "the second"}]}
FREE_DECISION = {**DECISION, "allowFreeText": True}
ORDERING = {"items": [{"id": "x", "label": "X"}, {"id": "y", "label": "Y"},
                      {"id": "z", "label": "Z"}]}
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
STRUCTURE = {"schema": SCHEMA, "value": {"n": 1}}
IMAGE = {"attachmentId": "att_0123456789abcdef", "mimeType": "image/png"}
DOCUMENT = {"url": "https://example.com/r.pdf", "mimeType": "application/pdf",
            "sizeBytes": 10, "filename": "r.pdf"}


def test_every_item_type_has_a_payload_model():
    assert set(_PAYLOADS) == set(T)


# --- payloads ------------------------------------------------------------------------------


@pytest.mark.parametrize(("item_type", "payload", "normalized"), [
    (T.APPROVAL, {}, {}),
    (T.APPROVAL, {"default": "no"}, {"default": "no"}),
    (T.DECISION, DECISION, {**DECISION, "allowFreeText": False}),
    (T.DECISION, {**FREE_DECISION, "default": "b"}, {**FREE_DECISION, "default": "b"}),
    (T.FEEDBACK, {}, {}),
    (T.FEEDBACK, {"placeholder": "Tell me", "maxLength": 5, "default": "ok"},
     {"placeholder": "Tell me", "maxLength": 5, "default": "ok"}),
    (T.ORDERING, ORDERING, ORDERING),
    (T.ORDERING, {**ORDERING, "minSelection": 1, "maxSelection": 2, "default": ["z"]},
     {**ORDERING, "minSelection": 1, "maxSelection": 2, "default": ["z"]}),
    (T.STRUCTURE_EDIT, STRUCTURE, STRUCTURE),
    (T.STRUCTURE_EDIT, {"schema": {"type": "null"}, "value": None},
     {"schema": {"type": "null"}, "value": None}),
    (T.OUTPUT_TEXT, {}, {"format": "markdown"}),
    (T.OUTPUT_TEXT, {"format": "plain"}, {"format": "plain"}),
    (T.OUTPUT_IMAGE, {**IMAGE, "caption": "a plot"}, {**IMAGE, "caption": "a plot"}),
    (T.OUTPUT_IMAGE, {"url": "https://example.com/p.png", "mimeType": " Image/PNG "},
     {"url": "https://example.com/p.png", "mimeType": "image/png"}),
    (T.OUTPUT_DOCUMENT, DOCUMENT, DOCUMENT),
])
def test_valid_payloads_are_normalized(item_type, payload, normalized):
    assert validate_payload(item_type, payload) == normalized


def test_snake_case_is_read_and_camel_case_written():
    assert validate_payload(T.DECISION, {**DECISION, "allow_free_text": True}) == FREE_DECISION


@pytest.mark.parametrize(("item_type", "payload", "message"), [
    (T.APPROVAL, {"default": "maybe"}, "APPROVAL payload: default: Input should be 'yes' or 'no'"),
    (T.APPROVAL, {"defualt": "yes"}, "defualt: unknown field (allowed: default)"),
    (T.APPROVAL, [], "APPROVAL payload must be a JSON object"),
    (T.DECISION, {}, "options: Field required"),
    (T.DECISION, {"options": []}, "options: List should have at least 1 item"),
    (T.DECISION, {"options": [{"value": "a", "label": "A"}, {"value": "a", "label": "B"}]},
     "options: value 'a' appears twice"),
    (T.DECISION, {"options": [{"value": "a", "label": "A", "icon": "x"}]},
     "options.0.icon: unknown field"),
    (T.DECISION, {**DECISION, "allowFreeText": "yes"},
     "allowFreeText: Input should be a valid boolean"),
    (T.DECISION, {**DECISION, "default": "c"},
     "DECISION payload: default is not a valid answer: chosen 'c' is not one of 'a', 'b'"),
    (T.FEEDBACK, {"maxLength": 0}, "maxLength: Input should be greater than or equal to 1"),
    (T.FEEDBACK, {"maxLength": 100_001}, "maxLength: Input should be less than or equal to"),
    (T.FEEDBACK, {"maxLength": 2, "default": "long"},
     "default is not a valid answer: text has 4 characters; at most 2 allowed"),
    (T.ORDERING, {"items": [{"id": "x", "label": "X"}, {"id": "x", "label": "Y"}]},
     "items: id 'x' appears twice"),
    (T.ORDERING, {**ORDERING, "maxSelection": 4}, "maxSelection 4 exceeds the number of items (3)"),
    (T.ORDERING, {**ORDERING, "minSelection": 2, "maxSelection": 1},
     "minSelection 2 is greater than maxSelection 1"),
    (T.ORDERING, {**ORDERING, "minSelection": -1}, "minSelection: Input should be greater than"),
    (T.ORDERING, {**ORDERING, "default": ["x", "q"]},
     "default is not a valid answer: orderedIds: 'q' is not one of 'x', 'y', 'z'"),
    (T.ORDERING, {**ORDERING, "default": ["x"]},
     "default is not a valid answer: orderedIds must list all 3 items once, not 1"),
    (T.STRUCTURE_EDIT, {"schema": {"type": "nope"}, "value": 1},
     "schema is not a valid JSON Schema: at $.type:"),
    (T.STRUCTURE_EDIT, {"schema": {"$schema": ["x"]}, "value": 1}, "$schema must be a URI string"),
    (T.STRUCTURE_EDIT, {"schema": SCHEMA}, "value: Field required"),
    (T.STRUCTURE_EDIT, {"schema": SCHEMA, "value": {"n": "one"}},
     "STRUCTURE_EDIT payload: value at $.n: 'one' is not of type 'integer'"),
    (T.STRUCTURE_EDIT, {**STRUCTURE, "default": {}},
     "default is not a valid answer: value at $: 'n' is a required property"),
    (T.STRUCTURE_EDIT, {"schema": {"$ref": "https://example.com/s.json"}, "value": 1},
     "cannot resolve $ref 'https://example.com/s.json'"),
    (T.STRUCTURE_EDIT, {"schema": {"$ref": "#/$defs/gone"}, "value": 1},
     "cannot resolve $ref '/$defs/gone'"),
    (T.OUTPUT_TEXT, {"format": "html"}, "format: Input should be 'markdown' or 'plain'"),
    (T.OUTPUT_IMAGE, {"mimeType": "image/png"}, "give exactly one of url and attachmentId"),
    (T.OUTPUT_IMAGE, {**IMAGE, "url": "https://example.com/p.png"},
     "give exactly one of url and attachmentId"),
    (T.OUTPUT_IMAGE, {**IMAGE, "mimeType": "text/html"}, "mimeType 'text/html' is not an image"),
    (T.OUTPUT_IMAGE, {**IMAGE, "mimeType": "png"}, "mimeType: 'png' is not a type/subtype"),
    (T.OUTPUT_IMAGE, {"url": "javascript:alert(1)", "mimeType": "image/png"},
     "url: must be an http:// or https:// URL"),
    (T.OUTPUT_IMAGE, {**IMAGE, "attachmentId": "../secret.key"},
     "attachmentId: '../secret.key' is not an attachment id"),
    (T.OUTPUT_DOCUMENT, {**DOCUMENT, "sizeBytes": -1}, "sizeBytes: Input should be greater than"),
    (T.OUTPUT_DOCUMENT, {k: v for k, v in DOCUMENT.items() if k != "filename"},
     "filename: Field required"),
])
def test_invalid_payloads_are_refused_naming_the_field(item_type, payload, message):
    with pytest.raises(InvalidInput, match="^" + item_type + " payload") as raised:
        validate_payload(item_type, payload)
    assert message in str(raised.value)


# --- answers -------------------------------------------------------------------------------


@pytest.mark.parametrize(("item_type", "payload", "value", "normalized"), [
    (T.APPROVAL, {}, {"approved": False}, {"approved": False}),
    (T.DECISION, DECISION, {"chosen": "b"}, {"chosen": "b"}),
    (T.DECISION, FREE_DECISION, {"freeText": "neither"}, {"freeText": "neither"}),
    (T.DECISION, FREE_DECISION, {"chosen": "a", "freeText": "but"},
     {"chosen": "a", "freeText": "but"}),
    (T.DECISION, FREE_DECISION, {"chosen": None, "freeText": "x"}, {"freeText": "x"}),
    (T.FEEDBACK, {"maxLength": 3}, {"text": "abc"}, {"text": "abc"}),
    (T.FEEDBACK, {}, {"text": ""}, {"text": ""}),
    (T.ORDERING, ORDERING, {"orderedIds": ["z", "x", "y"]}, {"orderedIds": ["z", "x", "y"]}),
    (T.ORDERING, {**ORDERING, "maxSelection": 2}, {"orderedIds": []}, {"orderedIds": []}),
    (T.ORDERING, {**ORDERING, "minSelection": 2}, {"orderedIds": ["y", "x", "z"]},
     {"orderedIds": ["y", "x", "z"]}),
    (T.STRUCTURE_EDIT, STRUCTURE, {"value": {"n": 7}}, {"value": {"n": 7}}),
    (T.STRUCTURE_EDIT, {"schema": {"type": ["null", "integer"]}, "value": 1}, {"value": None},
     {"value": None}),
])
def test_valid_answers_are_normalized(item_type, payload, value, normalized):
    assert validate_answer(item_type, payload, value) == normalized


@pytest.mark.parametrize(("item_type", "payload", "value", "message"), [
    (T.APPROVAL, {}, {"approved": "true"}, "approved: Input should be a valid boolean"),
    (T.APPROVAL, {}, {}, "approved: Field required"),
    (T.APPROVAL, {}, "yes", "APPROVAL answer must be a JSON object"),
    (T.APPROVAL, {}, {"approved": True, "why": "x"}, "why: unknown field (allowed: approved)"),
    (T.DECISION, DECISION, {"chosen": "x"}, "DECISION answer: chosen 'x' is not one of 'a', 'b'"),
    (T.DECISION, DECISION, {}, "chosen is required: one of 'a', 'b'"),
    (T.DECISION, DECISION, {"chosen": "a", "freeText": "hm"},
     "freeText is not allowed: this item has allowFreeText false"),
    (T.DECISION, FREE_DECISION, {"freeText": "  "}, "give chosen (one of 'a', 'b') or a non-empty"),
    (T.DECISION, DECISION, {"chosen": 1}, "chosen: Input should be a valid string"),
    (T.FEEDBACK, {"maxLength": 3}, {"text": "abcd"}, "text has 4 characters; at most 3 allowed"),
    (T.FEEDBACK, {}, {"text": "x" * 100_001}, "at most 100000 allowed"),
    (T.FEEDBACK, {}, {"text": None}, "text: Input should be a valid string"),
    (T.ORDERING, ORDERING, {"orderedIds": ["x", "y"]}, "must list all 3 items once, not 2"),
    (T.ORDERING, ORDERING, {"orderedIds": ["x", "y", "y"]}, "orderedIds: 'y' is listed twice"),
    (T.ORDERING, ORDERING, {"orderedIds": ["x", "y", "w"]}, "'w' is not one of 'x', 'y', 'z'"),
    (T.ORDERING, {**ORDERING, "minSelection": 2}, {"orderedIds": ["x"]},
     "orderedIds lists 1 items; between 2 and 3 allowed"),
    (T.ORDERING, {**ORDERING, "maxSelection": 1}, {"orderedIds": ["x", "y"]},
     "between 0 and 1 allowed"),
    (T.STRUCTURE_EDIT, STRUCTURE, {"value": {"n": 1.5}}, "value at $.n: 1.5 is not of type"),
    (T.STRUCTURE_EDIT, STRUCTURE, {}, "value: Field required"),
])
def test_invalid_answers_are_refused_naming_the_field(item_type, payload, value, message):
    with pytest.raises(InvalidInput, match="^" + item_type + " answer") as raised:
        validate_answer(item_type, payload, value)
    assert message in str(raised.value)


@pytest.mark.parametrize(("item_type", "payload"), [
    (T.OUTPUT_TEXT, {}), (T.OUTPUT_IMAGE, IMAGE), (T.OUTPUT_DOCUMENT, DOCUMENT)])
@pytest.mark.parametrize("value", [{}, {"approved": True}, None])
def test_outputs_take_no_answer(item_type, payload, value):
    with pytest.raises(InvalidInput, match=f"{item_type} items take no answer"):
        validate_answer(item_type, payload, value)


def test_an_answer_to_an_invalid_payload_names_the_payload():
    with pytest.raises(InvalidInput, match="DECISION payload: options: Field required"):
        validate_answer(T.DECISION, {}, {"chosen": "a"})


# --- defaults (§7) -------------------------------------------------------------------------


@pytest.mark.parametrize(("item_type", "payload", "answer"), [
    (T.APPROVAL, {"default": "yes"}, {"approved": True}),
    (T.APPROVAL, {"default": "no"}, {"approved": False}),
    (T.DECISION, {**DECISION, "default": "a"}, {"chosen": "a"}),
    (T.FEEDBACK, {"default": "fine"}, {"text": "fine"}),
    (T.ORDERING, {**ORDERING, "default": ["y", "z", "x"]}, {"orderedIds": ["y", "z", "x"]}),
    (T.STRUCTURE_EDIT, {**STRUCTURE, "default": {"n": 2}}, {"value": {"n": 2}}),
])
def test_a_default_becomes_a_valid_answer(item_type, payload, answer):
    assert default_answer(item_type, payload) == answer
    assert validate_answer(item_type, payload, answer) == answer


@pytest.mark.parametrize(("item_type", "payload"), [
    (T.APPROVAL, {}), (T.DECISION, DECISION), (T.FEEDBACK, {}), (T.ORDERING, ORDERING),
    (T.STRUCTURE_EDIT, STRUCTURE), (T.OUTPUT_TEXT, {}), (T.OUTPUT_IMAGE, IMAGE),
    (T.OUTPUT_DOCUMENT, DOCUMENT)])
def test_no_default_means_no_answer(item_type, payload: dict[str, Any]):
    assert default_answer(item_type, payload) is None


def test_default_answer_of_an_invalid_payload_is_refused():
    with pytest.raises(InvalidInput, match="APPROVAL payload: default"):
        default_answer(T.APPROVAL, {"default": "sure"})
