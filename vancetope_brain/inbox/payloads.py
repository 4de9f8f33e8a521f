"""Payload and answer rules of the eight Inbox item types (user-interaction.txt §4, §6, §7).

One pydantic model per type describes its payload (camelCase on the wire,
unknown fields refused) and knows which answer fits it; ``_PAYLOADS`` maps
every ``ItemType`` to its model. A payload's ``default`` must itself be a
valid answer, because a LOW item adopts it unseen (§7).

Every failure is an ``InvalidInput`` whose message names the type, the field
and what is allowed; pydantic and jsonschema errors never escape raw.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal, Self, TypeVar

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel

from vancetope_brain import schemas
from vancetope_brain.errors import InvalidInput
from vancetope_brain.inbox.attachments import ATTACHMENT_ID, MIME_TYPE
from vancetope_brain.models.base import Wire
from vancetope_brain.models.inbox import ItemType

MAX_TEXT = 100_000
"""Longest free text (FEEDBACK answer, DECISION freeText) and largest FEEDBACK maxLength."""
MAX_CHOICES = 500
"""Most DECISION options or ORDERING items one item may offer."""

_Key = Annotated[str, StringConstraints(min_length=1, max_length=200)]
_Label = Annotated[str, StringConstraints(min_length=1, max_length=500)]
_Note = Annotated[str, StringConstraints(max_length=2_000)]
_HTTP_URL = re.compile(r"https?://\S+")


def _http_url(value: str) -> str:
    if len(value) > 2_000 or not _HTTP_URL.fullmatch(value):
        raise ValueError("must be an http:// or https:// URL of at most 2000 characters")
    return value


def _mime_type(value: str) -> str:
    normalized = value.strip().lower()
    if not MIME_TYPE.fullmatch(normalized):
        raise ValueError(f"{value!r} is not a type/subtype like 'image/png'")
    return normalized


def _attachment_id(value: str) -> str:
    if not ATTACHMENT_ID.fullmatch(value):
        raise ValueError(f"{value!r} is not an attachment id (att_ and 16 hex digits)")
    return value


_Url = Annotated[str, AfterValidator(_http_url)]
_MimeType = Annotated[str, AfterValidator(_mime_type)]
_AttachmentId = Annotated[str, AfterValidator(_attachment_id)]


class _Model(Wire):
    """Strict: ``"true"`` is no bool and ``"3"`` no int, as clients must send real JSON types."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid",
                              strict=True)

    def dump(self) -> dict[str, Any]:
        """The camelCase form without absent optional fields."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


class _Payload(_Model):
    """Base of the payload models. ``ANSWER`` is the answer model, None for outputs."""

    ANSWER: ClassVar[type[_Model] | None] = None

    def check(self) -> None:
        """Rules across fields; raises ``ValueError`` naming the field."""

    def check_answer(self, answer: Any) -> None:
        """Rules tying an ``ANSWER`` to this item; raises ``ValueError`` naming the field."""

    def default_answer(self) -> _Model | None:
        """The answer a LOW item adopts (§7), None without a default."""
        return None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        self.check()
        default = self.default_answer()
        if default is not None:
            try:
                self.check_answer(default)
            except ValueError as e:
                raise ValueError(f"default is not a valid answer: {e}") from e
        return self


# --- answers (§6) --------------------------------------------------------------------------


class ApprovalAnswer(_Model):
    approved: bool


class DecisionAnswer(_Model):
    chosen: str | None = None
    free_text: str | None = Field(default=None, max_length=MAX_TEXT)


class FeedbackAnswer(_Model):
    text: str


class OrderingAnswer(_Model):
    ordered_ids: list[str] = Field(max_length=MAX_CHOICES)


class StructureEditAnswer(_Model):
    value: Any

    def dump(self) -> dict[str, Any]:
        return {"value": self.value}  # a JSON null is a value here, not an absent field


# --- asks (§4.1) ---------------------------------------------------------------------------


class ApprovalPayload(_Payload):
    ANSWER = ApprovalAnswer
    default: Literal["yes", "no"] | None = None

    def default_answer(self) -> ApprovalAnswer | None:
        return None if self.default is None else ApprovalAnswer(approved=self.default == "yes")


class DecisionOption(_Model):
    value: _Key
    label: _Label
    description: _Note | None = None


class DecisionPayload(_Payload):
    ANSWER = DecisionAnswer
    options: list[DecisionOption] = Field(min_length=1, max_length=MAX_CHOICES)
    allow_free_text: bool = False
    default: str | None = None

    def check(self) -> None:
        _refuse_duplicates("options", "value", [o.value for o in self.options])

    def check_answer(self, answer: DecisionAnswer) -> None:
        values = [o.value for o in self.options]
        if answer.free_text is not None and not self.allow_free_text:
            raise ValueError("freeText is not allowed: this item has allowFreeText false")
        if answer.chosen is not None:
            if answer.chosen not in values:
                raise ValueError(f"chosen {answer.chosen!r} is not one of {_listed(values)}")
        elif not self.allow_free_text:
            raise ValueError(f"chosen is required: one of {_listed(values)}")
        elif not (answer.free_text or "").strip():
            raise ValueError(f"give chosen (one of {_listed(values)}) or a non-empty freeText")

    def default_answer(self) -> DecisionAnswer | None:
        return None if self.default is None else DecisionAnswer(chosen=self.default)


class FeedbackPayload(_Payload):
    ANSWER = FeedbackAnswer
    placeholder: _Note | None = None
    max_length: int | None = Field(default=None, ge=1, le=MAX_TEXT)
    default: str | None = None

    def check_answer(self, answer: FeedbackAnswer) -> None:
        limit = self.max_length or MAX_TEXT
        if len(answer.text) > limit:
            raise ValueError(f"text has {len(answer.text)} characters; at most {limit} allowed")

    def default_answer(self) -> FeedbackAnswer | None:
        return None if self.default is None else FeedbackAnswer(text=self.default)


class OrderingItem(_Model):
    id: _Key
    label: _Label


class OrderingPayload(_Payload):
    """Without min/maxSelection an answer orders every item; with them it picks a subset."""

    ANSWER = OrderingAnswer
    items: list[OrderingItem] = Field(min_length=1, max_length=MAX_CHOICES)
    min_selection: int | None = Field(default=None, ge=0)
    max_selection: int | None = Field(default=None, ge=0)
    default: list[str] | None = None

    def check(self) -> None:
        _refuse_duplicates("items", "id", [i.id for i in self.items])
        for name, bound in (("minSelection", self.min_selection),
                            ("maxSelection", self.max_selection)):
            if bound is not None and bound > len(self.items):
                raise ValueError(f"{name} {bound} exceeds the number of items ({len(self.items)})")
        low, high = self.selection_bounds()
        if low > high:
            raise ValueError(f"minSelection {low} is greater than maxSelection {high}")

    def selection_bounds(self) -> tuple[int, int]:
        """How many ids an answer may list, inclusive."""
        if self.min_selection is None and self.max_selection is None:
            return len(self.items), len(self.items)
        high = len(self.items) if self.max_selection is None else self.max_selection
        return self.min_selection or 0, high

    def check_answer(self, answer: OrderingAnswer) -> None:
        ids = [i.id for i in self.items]
        for position, item_id in enumerate(answer.ordered_ids):
            if item_id not in ids:
                raise ValueError(f"orderedIds: {item_id!r} is not one of {_listed(ids)}")
            if item_id in answer.ordered_ids[:position]:
                raise ValueError(f"orderedIds: {item_id!r} is listed twice")
        low, high = self.selection_bounds()
        count = len(answer.ordered_ids)
        if low == high == len(ids) and count != low:
            raise ValueError(f"orderedIds must list all {low} items once, not {count}")
        if not low <= count <= high:
            raise ValueError(f"orderedIds lists {count} items; between {low} and {high} allowed")

    def default_answer(self) -> OrderingAnswer | None:
        return None if self.default is None else OrderingAnswer(ordered_ids=self.default)


class StructureEditPayload(_Payload):
    """``schema`` is any JSON Schema (2020-12 unless ``$schema`` names another draft) within
    the caps of ``vancetope_brain.schemas``, its patterns in RE2 syntax; ``value`` is the
    initial JSON and must already be valid against it. A JSON null ``default`` means no
    default."""

    ANSWER = StructureEditAnswer
    json_schema: dict[str, Any] = Field(alias="schema")
    value: Any
    default: Any = None

    def check(self) -> None:
        schemas.check(self.json_schema, self.value)

    def check_answer(self, answer: StructureEditAnswer) -> None:
        schemas.check(self.json_schema, answer.value)

    def default_answer(self) -> StructureEditAnswer | None:
        return None if self.default is None else StructureEditAnswer(value=self.default)

    def dump(self) -> dict[str, Any]:
        return {**super().dump(), "value": self.value}  # keep a JSON null initial value


# --- outputs (§4.2) ------------------------------------------------------------------------


class OutputTextPayload(_Payload):
    format: Literal["markdown", "plain"] = "markdown"


class _Media(_Payload):
    """A file shown by the client: an external ``url`` or a stored ``attachmentId``."""

    url: _Url | None = None
    attachment_id: _AttachmentId | None = None
    mime_type: _MimeType

    def check(self) -> None:
        if (self.url is None) == (self.attachment_id is None):
            raise ValueError("give exactly one of url and attachmentId")


class OutputImagePayload(_Media):
    caption: _Note | None = None

    def check(self) -> None:
        super().check()
        if not self.mime_type.startswith("image/"):
            raise ValueError(f"mimeType {self.mime_type!r} is not an image type (image/...)")


class OutputDocumentPayload(_Media):
    size_bytes: int = Field(ge=0)
    filename: Annotated[str, StringConstraints(min_length=1, max_length=255)]


_M = TypeVar("_M", bound=_Model)

_PAYLOADS: dict[ItemType, type[_Payload]] = {
    ItemType.APPROVAL: ApprovalPayload,
    ItemType.DECISION: DecisionPayload,
    ItemType.FEEDBACK: FeedbackPayload,
    ItemType.ORDERING: OrderingPayload,
    ItemType.STRUCTURE_EDIT: StructureEditPayload,
    ItemType.OUTPUT_TEXT: OutputTextPayload,
    ItemType.OUTPUT_IMAGE: OutputImagePayload,
    ItemType.OUTPUT_DOCUMENT: OutputDocumentPayload,
}


# --- the API -------------------------------------------------------------------------------


def validate_payload(type: ItemType, payload: dict[str, Any]) -> dict[str, Any]:
    """The normalized payload (defaults filled in, camelCase); ``InvalidInput`` if it is wrong."""
    return _parse(_PAYLOADS[type], payload, f"{type} payload").dump()


def validate_answer(type: ItemType, payload: dict[str, Any], value: Any) -> dict[str, Any]:
    """The normalized ``value`` of a DECIDED answer to an item with this (valid) payload.

    Raises ``InvalidInput`` when the value does not fit the item, and always
    for OUTPUT_* items, which take no answer.
    """
    item = _parse(_PAYLOADS[type], payload, f"{type} payload")
    if item.ANSWER is None:
        raise InvalidInput(f"{type} items take no answer: OUTPUT_* items can only be "
                           "dismissed or archived")
    answer = _parse(item.ANSWER, value, f"{type} answer")
    try:
        item.check_answer(answer)
    except ValueError as e:
        raise InvalidInput(f"{type} answer: {e}") from e
    return answer.dump()


def default_answer(type: ItemType, payload: dict[str, Any]) -> dict[str, Any] | None:
    """The answer value a LOW item adopts on creation (§7), None when it has no default."""
    answer = _parse(_PAYLOADS[type], payload, f"{type} payload").default_answer()
    return None if answer is None else answer.dump()


def _parse(model: type[_M], raw: Any, what: str) -> _M:
    if not isinstance(raw, dict):
        raise InvalidInput(f"{what} must be a JSON object")
    try:
        return model.model_validate(raw)
    except ValidationError as e:
        raise InvalidInput(f"{what}: {_describe(e, model)}") from e


def _describe(error: ValidationError, model: type[_Model]) -> str:
    problems = []
    for problem in error.errors(include_url=False):
        where = ".".join(str(part) for part in problem["loc"])
        message = problem["msg"].removeprefix("Value error, ")
        if problem["type"] == "extra_forbidden":
            message = "unknown field"
            if len(problem["loc"]) == 1:
                allowed = [f.alias or name for name, f in model.model_fields.items()]
                message += f" (allowed: {', '.join(allowed)})"
        problems.append(f"{where}: {message}" if where else message)
    return "; ".join(problems)


def _refuse_duplicates(field: str, key: str, values: list[str]) -> None:
    for position, value in enumerate(values):
        if value in values[:position]:
            raise ValueError(f"{field}: {key} {value!r} appears twice; each {key} must be unique")


def _listed(values: list[str]) -> str:
    return ", ".join(repr(v) for v in values)
