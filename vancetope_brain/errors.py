"""Every exception Vancetope raises on purpose.

    VancetopeError
    ├── UserError                 bad input from a client, a recipe, the config or a tool call; never retried
    │   ├── InvalidInput          (code ``invalid_input``)
    │   │   ├── BadJson           (code ``bad_json``) — a frame that is not JSON text
    │   │   ├── UnknownFrameType  (code ``unknown_type``)
    │   │   ├── RecipeError       (code ``invalid_input``) — a malformed recipe or an unrenderable prompt
    │   │   │   └── RenderBudgetExceeded (code ``invalid_input``) — a template render would pass a bound of the sandbox
    │   │   ├── UnsupportedDocument (code ``unsupported_document``) — a file of a type knowledge does not read
    │   │   ├── UnreadableDocument (code ``unreadable_document``) — a corrupt file, or one whose parsing passes its bounds
    │   │   ├── UnsupportedParameter (code ``unsupported_parameter``) — an OpenAI request field the door cannot honour faithfully
    │   │   ├── DestinationRefused (code ``destination_refused``) — a webhook URL that is malformed or not a public address
    │   │   └── InvalidSchedule   (code ``invalid_schedule``) — a cron expression, time zone or interval a schedule cannot use
    │   ├── NotFound              (code ``not_found``) — also what a foreign tenant's id looks like
    │   │   ├── UnknownRecipe     (code ``not_found``) — the message suggests the closest name
    │   │   └── ModelNotFound     (code ``model_not_found``) — an OpenAI "model" that is no chat recipe the caller may start
    │   ├── Conflict              (code ``conflict``) — the request is illegal in the current state
    │   │   └── FingerprintMismatch (code ``fingerprint_mismatch``) — the session is another machine's
    │   ├── Unauthorized          (code ``unauthorized``)
    │   ├── Forbidden             (code ``forbidden``) — a signed link forged or expired; a role that may not (/admin/)
    │   │   └── OperatorOnly      (code ``operator_only``) — a tenant's user wrote what only the operator grants (engine roles)
    │   ├── RateLimited           (code ``rate_limited``)
    │   ├── LimitExceeded         (code ``limit_exceeded``) — one more would pass a documented cap
    │   │   ├── DocumentTooLarge  (code ``document_too_large``) — a file over the per-file cap
    │   │   ├── ProjectKnowledgeFull (code ``project_knowledge_full``) — the project's documents would pass a cap
    │   │   ├── TenantKnowledgeFull (code ``tenant_knowledge_full``) — the tenant's documents would pass a cap
    │   │   ├── MemoryFull        (code ``memory_full``) — one more memory entry would pass its scope's cap
    │   │   ├── InputTooLarge     (code ``input_too_large``) — an OpenAI request's messages pass a size cap
    │   │   └── QuotaExceeded     (code ``quota_exceeded``) — a turn would start over a tenant's or user's token/cost quota
    │   ├── ConfigError           (code ``config_error``)
    │   ├── UnknownEngine         (code ``unknown_engine``)
    │   └── ToolError             (code ``tool_error``) — a tool's own failure, the model's to handle
    ├── RuntimeFailure            something below us failed; may succeed later
    │   ├── ReplyTimeout          (code ``reply_timeout``) — a process did not answer within the OpenAI door's wait
    │   ├── StoreError            (code ``store_error``)
    │   └── LlmError              (code ``llm_error``)
    │       ├── LlmRejected       (code ``llm_rejected``) — the provider refuses the input itself (content filter, context limit)
    │       ├── StructuredOutputError (code ``structured_output``) — an answer that fails its schema after one repair
    │       ├── UnknownLlmProfile (code ``unknown_llm_profile``) — a recipe or setting names a profile nobody configured
    │       ├── EmbeddingFailed   (code ``embedding_failed``) — the embedding endpoint is down, refuses or times out
    │       │   └── EmbeddingInvalid (code ``embedding_invalid``) — it answered garbage (count, dimension, non-finite values)
    │       └── JournalFull       (code ``journal_full``) — a turn's journal would pass its entry or size cap
    └── Signal                    control flow, never shown to a user
        ├── Fenced                the lane lease was taken over; this worker must write nothing
        ├── Interrupted           the user stopped the turn (``process-interrupt``); it commits what was said
        └── StrategyEnded         a vogon strategy ended inside a turn; the engine closes the process

Each error carries a stable ``code`` that the protocol puts on the wire. The test doubles'
errors (``vancetope_brain.llm.testing``) stay outside the tree on purpose: they must fail a
test, not be handled like an LLM failure.
"""

from __future__ import annotations

from typing import Any


class VancetopeError(Exception):
    """Base of every error Vancetope raises on purpose."""

    code = "internal"
    param: str | None = None
    """The request field at fault, where a door names it (the OpenAI door's ``param``)."""


class UserError(VancetopeError):
    """Raised when the caller asked for something malformed or illegal."""

    code = "invalid_input"


class InvalidInput(UserError):
    """Raised when input fails validation (a frame, a body, a field)."""


class DestinationRefused(InvalidInput):
    """Raised when a webhook URL is malformed or its host resolves to an address that is not
    public (and the operator does not allow those: ``VANCETOPE_WEBHOOK_ALLOW_PRIVATE``)."""

    code = "destination_refused"


class BadJson(InvalidInput):
    """Raised when a frame is not JSON text: invalid JSON, or a lone surrogate escape that no
    text can hold."""

    code = "bad_json"


class UnknownFrameType(InvalidInput):
    """Raised when a frame's type is not one the protocol knows; the message lists them."""

    code = "unknown_type"


class RecipeError(InvalidInput):
    """Raised when a recipe is malformed (YAML, a field, a template) or its prompt cannot render.

    The message names where (the file or the stored scope) and the field path.
    """


class RenderBudgetExceeded(RecipeError):
    """Raised when a template render would pass one of the sandbox's bounds
    (``vancetope_brain.models.sandbox``); the message names the bound. The renderer re-raises
    it as a ``RecipeError`` naming the template."""


class UnsupportedDocument(InvalidInput):
    """Raised when a file added to a project's knowledge is of a type it does not read; the
    message lists the types it reads."""

    code = "unsupported_document"


class UnreadableDocument(InvalidInput):
    """Raised when a document cannot be read: a corrupt file, or one whose parsing passes a
    bound (time, memory, pages, chunks); the message names which. Nothing of it is stored."""

    code = "unreadable_document"


class UnsupportedParameter(InvalidInput):
    """Raised when an OpenAI request asks what Vancetope cannot honour faithfully (the
    caller's tools, ``n`` > 1, log probabilities): refused, never silently ignored."""

    code = "unsupported_parameter"


class InvalidSchedule(InvalidInput):
    """Raised when a schedule's cron expression does not parse, its time zone is unknown, or
    its ticks come closer than the minimum interval."""

    code = "invalid_schedule"


class NotFound(UserError):
    """Raised when a record does not exist or belongs to another tenant or user."""

    code = "not_found"


class UnknownRecipe(NotFound):
    """Raised when no recipe has the name in the cascade; the message suggests the closest."""


class ModelNotFound(NotFound):
    """Raised when an OpenAI request's ``model`` names no chat recipe the caller may start."""

    code = "model_not_found"


class Conflict(UserError):
    """Raised when the request is illegal in the record's current state (e.g. steer on CLOSED)."""

    code = "conflict"


class FingerprintMismatch(Conflict):
    """Raised when a client on another machine tries to bind a session (think-engines §6)."""

    code = "fingerprint_mismatch"


class Unauthorized(UserError):
    """Raised when a request carries no valid credentials."""

    code = "unauthorized"


class Forbidden(UserError):
    """Raised when a signed link (an attachment URL) is forged, malformed or expired, or when
    a token's role does not allow what it asks (a user token on ``/admin/``, a tenant
    operator creating a tenant)."""

    code = "forbidden"


class OperatorOnly(Forbidden):
    """Raised when a tenant's user writes what only the deployment's operator may grant: a
    recipe with engine ``roles`` over the protocol (``RecipeAdmin``; the admin CLI writes as
    the operator)."""

    code = "operator_only"


class RateLimited(UserError):
    """Raised when a connection exceeds its request rate."""

    code = "rate_limited"


class LimitExceeded(UserError):
    """Raised when a request would pass a documented cap (docs/protocol.md "Limits"):
    sessions, processes, Inbox items, connections, definitions per tenant, a definition's
    size, …; nothing of it is stored. The message names the cap."""

    code = "limit_exceeded"


class DocumentTooLarge(LimitExceeded):
    """Raised when a file is larger than the per-file knowledge cap."""

    code = "document_too_large"


class ProjectKnowledgeFull(LimitExceeded):
    """Raised when one more document would pass the project's cap (documents or bytes)."""

    code = "project_knowledge_full"


class TenantKnowledgeFull(LimitExceeded):
    """Raised when one more document would pass the tenant's cap on knowledge bytes."""

    code = "tenant_knowledge_full"


class MemoryFull(LimitExceeded):
    """Raised when one more memory entry would pass the cap of entries of its scope; nothing
    of it is stored."""

    code = "memory_full"


class InputTooLarge(LimitExceeded):
    """Raised when an OpenAI request's messages pass a size cap (their count, the steered
    text's length)."""

    code = "input_too_large"


class QuotaExceeded(LimitExceeded):
    """Raised when a turn would start while its tenant or user has used up a token or cost
    quota of the day or month (``quota.*`` settings, ``lanes/quota.py``): its code is put on
    the held process's chat line and ``lastError``."""

    code = "quota_exceeded"


class ConfigError(UserError):
    """Raised when the environment configuration is invalid."""

    code = "config_error"


class UnknownEngine(UserError):
    """Raised when an engine name is not registered; the message suggests the closest name."""

    code = "unknown_engine"


class ToolError(UserError):
    """Raised when a tool cannot do what the model asked; the model gets the message as the
    call's error result (not a bug, never a frame)."""

    code = "tool_error"


class RuntimeFailure(VancetopeError):
    """Raised when a dependency failed; the same call may succeed later."""

    code = "runtime_failure"


REDIS_DOWN = ("Redis is not answering; what you sent may already be stored: send it again "
              "in a moment, with the same idempotency key, and it is stored once")
"""What a client is told (code ``runtime_failure``) when a request meets a Redis outage."""


class ReplyTimeout(RuntimeFailure):
    """Raised when a process did not answer within the OpenAI door's wait; its reply still
    arrives in the session."""

    code = "reply_timeout"


class StoreError(RuntimeFailure):
    """Raised when the store cannot be read or written."""

    code = "store_error"


class LlmError(RuntimeFailure):
    """Raised when the LLM endpoint fails after its retries (timeout, 5xx, bad response)."""

    code = "llm_error"


class LlmRejected(LlmError):
    """Raised when the LLM endpoint refuses a request for what it holds (a content filter, a
    context limit): unlike an outage, the same input fails again, so the turn's input is
    set aside from the model's context (``engines/context.py``)."""

    code = "llm_rejected"


class UnknownLlmProfile(LlmError):
    """Raised when a process calls its model but its recipe or settings name an LLM endpoint
    profile that is not configured (``VANCETOPE_LLM_PROFILES``)."""

    code = "unknown_llm_profile"


class EmbeddingFailed(LlmError):
    """Raised when the embedding endpoint (``rag.embedding.profile``) cannot be reached, times
    out, answers an HTTP error, or the setting names a profile nobody configured."""

    code = "embedding_failed"


class EmbeddingInvalid(EmbeddingFailed):
    """Raised when the embedding endpoint answers, but not with one finite vector of one
    dimension per text asked (``llm/embeddings.py``)."""

    code = "embedding_invalid"


class JournalFull(LlmError):
    """Raised when a turn journal entry would pass ``MAX_ENTRY_BYTES`` or a process's journal
    would hold more than ``MAX_ENTRIES`` (``vancetope_brain.store.journal``). An LlmError
    because it surfaces from ``context.llm().complete``, where engines handle a model that
    cannot answer; a tool call the journal cannot record becomes an error result instead."""

    code = "journal_full"


class StructuredOutputError(LlmError):
    """Raised when a model's structured output fails its schema again after one repair."""

    code = "structured_output"


class Signal(VancetopeError):  # noqa: N818 - a signal, not an error
    """Base of control-flow exceptions; never reported to a user."""


class Fenced(Signal):
    """Raised when this worker's lane lease or epoch was taken over; it must write nothing."""

    code = "fenced"


class Interrupted(Signal):
    """Raised when the user stopped the running turn (``process-interrupt``): by its model
    call, cut at its next chunk, or at the turn's next model call. ``said``: the text the cut call had
    streamed, which the turn commits as the assistant's line marked ``interrupted``."""

    code = "interrupted"

    def __init__(self, said: str = "") -> None:
        super().__init__("the turn was interrupted")
        self.said = said
        #: The cut call's answer as far as it went (an ``llm.LlmResponse``, set by the turn's
        #: ``FencedModel``), so its tokens are counted and the inspector shows it; None when
        #: the turn stopped before a call began.
        self.answer: Any = None


class StrategyEnded(Signal):
    """Raised when a vogon strategy ends inside a turn (``outcome`` completed, stopped or
    failed); the engine catches it, writes the synthesis and closes the process."""

    code = "strategy_ended"

    def __init__(self, outcome: str, reason: str) -> None:
        super().__init__(reason)
        self.outcome, self.reason = outcome, reason
