"""Typed settings resolved over the cascade user → project → tenant → default (innermost wins).

Every key is registered in ``KEYS`` with its type, default and description;
values are validated against the key when written (``InvalidInput`` naming
the key), and an unknown key is refused with the closest known name. Stored
values live per *scope*: the tenant, one of its projects, or one of its
users. A user's value applies in every project of the tenant.

No session scope: what a session may override (idle timeout, disconnect
policy) is a field of the session document, fixed at creation; the
``session.*`` keys here are the defaults new sessions take.

Model selection: ``<engine>.model`` (e.g. ``arthur.model``) resolved over the
whole cascade beats ``llm.model``; unset both, and the deployment's
``VANCETOPE_LLM_MODEL`` applies (``SettingsApi.model_for`` returns None).
``<engine>.profile`` and ``llm.profile`` name the LLM endpoint profile the same
way; ``vancetope_brain.llm.profiles.choose`` combines them with the recipe's
``model`` field.
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vancetope_brain.errors import InvalidInput
from vancetope_brain.models.settings import SettingLevel, SettingScope

if TYPE_CHECKING:
    from vancetope_brain.models import ThinkProcess
    from vancetope_brain.store import IdentityStore, SettingStore

log = logging.getLogger(__name__)


_TRUE, _FALSE = {"true", "yes", "on", "1"}, {"false", "no", "off", "0"}


@dataclass(frozen=True)
class SettingKey:
    """A registered key. ``default=None`` means "unset unless someone sets it"."""

    name: str
    type: type
    default: Any
    description: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    pattern: str | None = None
    pattern_hint: str = ""
    tenant_only: bool = False
    """Stored at the tenant's level only (a policy of the whole tenant, such as retention);
    a project or user value is refused."""

    def validate(self, value: Any) -> Any:
        """``value`` if it fits the key; else ``InvalidInput`` naming the key. A float key
        takes an int too (as that float)."""
        if self.type is dict:
            return _price_table(self.name, value)
        if self.type is float and type(value) is int:
            value = float(value)
        finite = not isinstance(value, float) or math.isfinite(value)
        if type(value) is not self.type or not finite:
            # bool is not an int here, and NaN or infinity is no number of a setting
            raise InvalidInput(f"setting {self.name} takes {self._a_type}, not {value!r}")
        return self._check_range(value)

    def _check_range(self, value: Any) -> Any:
        if self.choices and value not in self.choices:
            raise InvalidInput(f"setting {self.name} is one of {', '.join(self.choices)}, "
                               f"not {value!r}")
        if self.minimum is not None and value < self.minimum:
            raise InvalidInput(f"setting {self.name} is at least {self.minimum}, not {value!r}")
        if self.maximum is not None and value > self.maximum:
            raise InvalidInput(f"setting {self.name} is at most {self.maximum}, not {value!r}")
        if self.pattern is not None and not re.fullmatch(self.pattern, value):
            raise InvalidInput(f"setting {self.name} must be {self.pattern_hint}, not {value!r}")
        return value

    def parse(self, text: str) -> Any:
        """A value typed on a command line, converted to the key's type and validated."""
        value: Any = text
        if self.type is dict:
            try:
                value = json.loads(text)
            except ValueError:
                raise InvalidInput(f"setting {self.name} takes a JSON object, "
                                   f"not {text!r}") from None
        elif self.type in (int, float):
            try:
                value = self.type(text)
            except ValueError:
                raise InvalidInput(f"setting {self.name} takes {self._a_type}, "
                                   f"not {text!r}") from None
        elif self.type is bool:
            if text.lower() not in _TRUE | _FALSE:
                raise InvalidInput(f"setting {self.name} takes true or false, not {text!r}")
            value = text.lower() in _TRUE
        return self.validate(value)

    @property
    def _a_type(self) -> str:
        name = self.type.__name__
        return f"an {name}" if name[0] in "aeiou" else f"a {name}"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type.__name__, "default": self.default,
                "description": self.description, **({"choices": list(self.choices)}
                                                   if self.choices else {}),
                **({"tenantOnly": True} if self.tenant_only else {})}


def _price_table(name: str, value: Any) -> dict[str, dict[str, float]]:
    """A price table (``llm.prices``): ``{model: {"in": price, "out": price}}``, each price
    per 1M tokens, a finite number >= 0 (an int becomes a float)."""
    hint = f'setting {name} is {{"<model>": {{"in": <price>, "out": <price>}}, …}}'
    if type(value) is not dict or len(value) > 200:
        raise InvalidInput(f"{hint} (at most 200 models), not {value!r}")
    table: dict[str, dict[str, float]] = {}
    for model, prices in value.items():
        if not 0 < len(model) <= 200 or type(prices) is not dict or set(prices) != {"in", "out"}:
            raise InvalidInput(f"{hint}, not {model!r}: {prices!r}")
        for price in prices.values():
            if type(price) not in (int, float) or not math.isfinite(price) or price < 0:
                raise InvalidInput(f"{hint}: a price is a number >= 0, not {price!r}")
        table[model] = {direction: float(price) for direction, price in prices.items()}
    return table


_KEBAB = r"[a-z][a-z0-9]*(-[a-z0-9]+)*"
_A_PROFILE: dict[str, Any] = {"pattern": _KEBAB, "pattern_hint": "a profile name (lowercase-kebab)"}
"""The bounds of a setting naming an LLM endpoint profile."""
_HH_MM = r"([01][0-9]|2[0-3]):[0-5][0-9]"


def _k(name: str, type_: type, default: Any, description: str, **kw: Any) -> SettingKey:
    return SettingKey(name, type_, default, description, **kw)


MAX_QUOTA_TOKENS = 10**12
"""Largest token quota (a trillion tokens); a cost quota's largest is the same number."""


def _quota_keys() -> list[SettingKey]:
    """``quota.{tenant,user}.{tokens,cost}Per{Day,Month}`` (``lanes/quota.py``)."""
    keys = []
    for who, scope in (("tenant", "the whole tenant's (every user's) usage; tenant level "
                                  "only"),
                       ("user", "each user's own usage; at the tenant's level for every "
                                "user, at a user's for that user")):
        for what, type_, unit in (("tokens", int, "tokens (in + out)"),
                                  ("cost", float, "cost (by llm.prices)")):
            for period in ("Day", "Month"):
                keys.append(_k(
                    f"quota.{who}.{what}Per{period}", type_, None,
                    f"Most {unit} per {period.lower()} (UTC) of {scope}. A turn that would "
                    f"start over it is refused with quota_exceeded and its process is held "
                    f"until the next {period.lower()} or a raised quota (unset: no quota).",
                    minimum=0, maximum=MAX_QUOTA_TOKENS,
                    tenant_only=who == "tenant"))
    return keys


KEYS: dict[str, SettingKey] = {k.name: k for k in [
    _k("session.defaultChatEngine", str, "arthur",
       "Engine of the chat process every new interactive session starts with.",
       pattern=_KEBAB, pattern_hint="an engine name (lowercase-kebab)"),
    _k("session.idleTimeoutSec", int, 1800,
       "Seconds without a client before a new session counts as idle.", minimum=1),
    _k("chat.historyLimit", int, 200,
       "How many chat lines ford loads as conversation context (Arthur's token budget "
       "decides its own).", minimum=1),
    _k("arthur.maxContextTokens", int, 65536,
       "Token budget of one Arthur turn; older chat is summarised or truncated beyond it.", minimum=1024),
    _k("chat.summaryThreshold", float, 0.75,
       "Share of a turn's token budget (what the prompt and tools leave) the chat history may "
       "fill before its older part is summarised by the model.", minimum=0.1, maximum=1.0),
    _k("ford.maxContextTokens", int, 65536,
       "Token budget of one ford turn; older chat is summarised or truncated beyond it.",
       minimum=1024),
    _k("arthur.includeProjectMemorySummary", bool, True,
       "Whether Arthur's context holds the project's memory summary: the project-scope "
       "memory entries bearing on the turn's user messages, then the newest."),
    _k("zaphod.maxHeads", int, 5,
       "Most heads one zaphod council may have; a larger council is refused.", minimum=1),
    _k("zaphod.maxRounds", int, 3,
       "Most rounds a zaphod debate may have; more are refused.", minimum=1),
    _k("zaphod.headTimeoutSec", int, 600,
       "Seconds a zaphod head may take; a head still running then is stopped and counted "
       "missing.", minimum=1),
    _k("zaphod.sequential", bool, False,
       "Whether zaphod's heads run one after another instead of in parallel (the param "
       "sequential beats it)."),
    _k("vogon.maxPhases", int, 50,
       "Phase runs one vogon process may start (loop repeats and onFail jumps count); "
       "reaching it ends the strategy as failed.", minimum=1),
    _k("vogon.maxLoopIterations", int, 10,
       "Upper bound on a vogon phase's maxIterations (runs of one phase until its gate "
       "passes; strategies may allow at most 100).", minimum=1),
    _k("vogon.maxForkBranches", int, 8,
       "Branches (parallel workers) one vogon fork phase may have (strategies may have at "
       "most 8).", minimum=1),
    _k("llm.model", str, None,
       "Model name for every engine (unset: the deployment's VANCETOPE_LLM_MODEL)."),
    _k("llm.profile", str, None,
       "LLM endpoint profile for every engine (unset: the profile `default`, the "
       "deployment's OPENAI_* endpoint).", **_A_PROFILE),
    _k("llm.prices", dict, None,
       'Prices of models per 1M tokens, {"<model>": {"in": <price>, "out": <price>}} '
       "(unset: usage shows no cost; a model it does not list costs nothing). The cost the "
       "usage frame shows is tokens × these prices as they are when read. Tenant level only.",
       tenant_only=True),
    *_quota_keys(),
    _k("notify.email.address", str, None,
       "E-mail address for notifications; setting it enables the e-mail channel.",
       pattern=r"[^@\s]+@[^@\s]+", pattern_hint="an e-mail address"),
    _k("notify.email.minCriticality", str, "NORMAL",
       "Lowest inbox item criticality that is e-mailed.", choices=("LOW", "NORMAL", "CRITICAL")),
    _k("notify.email.batchIntervalSec", int, 300,
       "Seconds e-mail notifications are collected into one message (one per address).",
       minimum=0),
    _k("notify.quietHours.start", str, None,
       "Start of quiet hours, HH:MM local time (unset: no quiet hours); e-mail they hold "
       "back is sent when they end.",
       pattern=_HH_MM, pattern_hint="HH:MM"),
    _k("notify.quietHours.end", str, None, "End of quiet hours, HH:MM local time.",
       pattern=_HH_MM, pattern_hint="HH:MM"),
    _k("notify.timeZone", str, "UTC",
       "The user's IANA time zone; quiet hours are read in it.",
       pattern=r"UTC|[A-Z][A-Za-z_]+(/[A-Za-z0-9_+-]+)+", pattern_hint="an IANA zone like Europe/Berlin"),
    _k("notify.quietHours.exceptCritical", bool, True,
       "Whether CRITICAL items are e-mailed during quiet hours (else they wait for the end "
       "too)."),
    _k("inbox.autoArchiveAfterDays", int, 30,
       "Days after which ANSWERED and DISMISSED inbox items are archived (PENDING never).",
       minimum=1),
    _k("retention.closedSessionDays", int, None,
       "Days a CLOSED session is kept after it closed; then housekeeping deletes it whole: "
       "its processes with their chat, steer messages, turn records, journal, timers and "
       "events (unset: kept forever). A session a PENDING Inbox ask came from, or with a "
       "process not CLOSED, is kept; Inbox items, memory and documents are never deleted. "
       "Tenant level only.", minimum=1, tenant_only=True),
    _k("retention.deliveryLogDays", int, None,
       "Days a notification delivery record is kept; then housekeeping deletes it (unset: "
       "kept forever; a QUEUED one is kept until sent). Tenant level only.", minimum=1,
       tenant_only=True),
    _k("retention.auditLogDays", int, 400,
       "Days an audit record (an operator's action) is kept; then housekeeping deletes it. "
       "Capped by default, unlike the other retentions: the log grows with every operator "
       "write and nothing else bounds it. At most 36500 (100 years). Tenant level only.",
       minimum=1, maximum=36_500, tenant_only=True),
    _k("retention.turnRecordDays", int, 30,
       "Days an inspector turn record (what a turn's model saw, its tool calls, tokens) is "
       "kept; then housekeeping deletes it (a CLOSED session's records go with the session "
       "sooner). At most 36500. Tenant level only.",
       minimum=1, maximum=36_500, tenant_only=True),
    _k("marvin.maxDepth", int, 3,
       "Most planning levels of a marvin task tree (the root plan is level 1).", minimum=1),
    _k("marvin.maxNodes", int, 40,
       "Most nodes of a marvin task tree; a plan that would pass it is cut down.", minimum=3),
    _k("marvin.maxParallelWorkers", int, 3,
       "Most worker processes one marvin process runs at the same time.", minimum=1),
    _k("marvin.maxTokens", int, 200_000,
       "Token budget of marvin's own plan and aggregate calls; once spent, the tree stops "
       "growing and finishes with what it has.", minimum=1000),
    _k("marvin.workerRetries", int, 1,
       "How often marvin starts a failed worker again before the node fails.", minimum=0),
    _k("marvin.replanFailed", bool, True,
       "Whether marvin plans another way to a step whose worker failed for good (within "
       "maxDepth, maxNodes and maxTokens)."),
    _k("rag.autoInject.enabled", bool, True,
       "Whether Arthur searches the project's documents for the user's messages of a turn "
       "and puts the passages found into its context (the recipe param rag.autoInject "
       "beats it)."),
    _k("rag.topK", int, 5,
       "Most document passages one search puts into a turn's context.", minimum=1,
       maximum=20),
    _k("rag.minScore", float, 0.2,
       "Lowest score (0 to 1) a document passage needs to be put into a turn's context.",
       minimum=0.0, maximum=1.0),
    _k("rag.embedding.profile", str, None,
       "LLM endpoint profile whose /v1/embeddings embeds the project's documents and "
       "searches (unset: lexical search only).", **_A_PROFILE),
    _k("rag.embedding.model", str, None,
       "Embedding model asked of rag.embedding.profile (unset: the profile's model).",
       pattern=r"\S{1,200}", pattern_hint="a model name (1 to 200 characters, no spaces)"),
]}

ENGINE_MODEL_SUFFIX = ".model"
ENGINE_PROFILE_SUFFIX = ".profile"
# Namespaces of KEYS that are not engines, so "chat.model" is a typo, not an engine's model.
_NOT_ENGINES = frozenset({"session", "chat", "llm", "notify", "inbox", "rag", "retention",
                          "quota"})


def _engine_key(name: str) -> SettingKey | None:
    """``<engine>.model`` or ``<engine>.profile`` for any engine name, else None."""
    for suffix in (ENGINE_MODEL_SUFFIX, ENGINE_PROFILE_SUFFIX):
        engine = name.removesuffix(suffix)
        if name.endswith(suffix) and re.fullmatch(_KEBAB, engine) and engine not in _NOT_ENGINES:
            if suffix == ENGINE_MODEL_SUFFIX:
                return SettingKey(name, str, None, f"Model name for the {engine} engine "
                                  "(beats llm.model; unset: llm.model).")
            return SettingKey(name, str, None, f"LLM endpoint profile for the {engine} engine "
                              "(beats llm.profile; unset: llm.profile).", **_A_PROFILE)
    return None


def setting_key(name: str) -> SettingKey:
    """The key named ``name``; ``<engine>.model`` and ``<engine>.profile`` work for any
    engine name. Raises ``InvalidInput`` suggesting the closest known name."""
    if name in KEYS:
        return KEYS[name]
    key = _engine_key(name)
    if key is not None:
        return key
    close = difflib.get_close_matches(name, [*KEYS, "<engine>.model", "<engine>.profile"], n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise InvalidInput(f"unknown setting {name!r}{hint}")


def _cascade(project_id: str | None, user_id: str | None) -> list[SettingScope]:
    """Innermost first."""
    scopes = [SettingScope.user(user_id)] if user_id else []
    if project_id:
        scopes.append(SettingScope.project(project_id))
    return [*scopes, SettingScope.tenant()]


def _innermost(tenant_id: str, key: str,
               found: Iterable[tuple[SettingScope, Any | None]]) -> tuple[Any, SettingScope | None]:
    """The first stored value (innermost scope first) that fits ``key``, and its scope; the
    key's default and None if none does (a value that no longer fits is skipped, logged)."""
    spec = setting_key(key)
    for scope, value in found:
        if value is None:
            continue
        try:
            return spec.validate(value), scope
        except InvalidInput as e:
            log.warning("ignoring stored %s of tenant %s: %s", scope, tenant_id, e)
    return spec.default, None


@dataclass(frozen=True)
class StoredCascade:
    """The values stored at each scope of one cascade, innermost first, as read at one
    moment; resolves any key from them without reading the store again."""

    tenant_id: str
    scopes: list[tuple[SettingScope, dict[str, Any]]]

    def resolve_with_source(self, key: str) -> tuple[Any, SettingScope | None]:
        """As ``SettingsService.resolve_with_source``, from what was read."""
        return _innermost(self.tenant_id, key,
                          ((scope, values.get(key)) for scope, values in self.scopes))


class SettingsService:
    """Reads and writes settings on the store. Every call reads the store (no cache)."""

    def __init__(self, store: SettingStore, identity: IdentityStore, *,
                 quota_written: Callable[[str], object] | None = None) -> None:
        self._store = store
        self._identity = identity
        self._quota_written = quota_written
        """Called with the tenant after a ``quota.*`` or ``llm.prices`` write: the processes
        a quota holds look again (``lanes.quota.release_holds``)."""

    def resolve(self, tenant_id: str, project_id: str | None, user_id: str | None,
                key: str) -> Any:
        """The innermost value (user → project → tenant), else the key's default."""
        return self.resolve_with_source(tenant_id, project_id, user_id, key)[0]

    def resolve_with_source(self, tenant_id: str, project_id: str | None, user_id: str | None,
                            key: str) -> tuple[Any, SettingScope | None]:
        """The value and the scope it came from (None: the default). A stored value that no
        longer fits its key (the key's type changed) is skipped with a warning."""
        scopes = _cascade(project_id, user_id)
        values = self._store.setting_values(tenant_id, scopes, setting_key(key).name)
        return _innermost(tenant_id, key, zip(scopes, values, strict=True))

    def cascade(self, tenant_id: str, project_id: str | None,
                user_id: str | None) -> StoredCascade:
        """What is stored at every scope of the cascade, read at once (one store read): the
        source of a ``SettingsApi``'s values."""
        scopes = _cascade(project_id, user_id)
        return StoredCascade(tenant_id, list(zip(
            scopes, self._store.cascade_settings(tenant_id, scopes), strict=True)))

    def set(self, tenant_id: str, scope: SettingScope, key: str, value: Any) -> Any:
        """Validate and store; returns the value. A project or user scope must exist; a
        ``tenant_only`` key takes the tenant's scope only."""
        spec = setting_key(key)
        value = spec.validate(value)
        if spec.tenant_only and scope.level is not SettingLevel.TENANT:
            raise InvalidInput(f"setting {key} applies to the whole tenant: set it at the "
                               f"tenant's level, not for {scope}")
        self._check_scope(tenant_id, scope)
        self._store.set_setting(tenant_id, scope, key, value)
        self._written(tenant_id, spec.name)
        return value

    def unset(self, tenant_id: str, scope: SettingScope, key: str) -> None:
        """Remove the value stored at this scope; raises ``NotFound`` if none is."""
        setting_key(key)
        self._store.delete_setting(tenant_id, scope, key)
        self._written(tenant_id, key)

    def _written(self, tenant_id: str, key: str) -> None:
        if self._quota_written is not None and (key.startswith("quota.")
                                                or key == "llm.prices"):
            self._quota_written(tenant_id)

    def stored(self, tenant_id: str, scope: SettingScope) -> dict[str, Any]:
        """The values stored at exactly this scope, by key."""
        return self._store.list_settings(tenant_id, scope)

    def effective(self, tenant_id: str, project_id: str | None,
                  user_id: str | None) -> dict[str, tuple[Any, SettingScope | None]]:
        """Every registered key (and every ``<engine>.model``/``.profile`` set anywhere in the
        cascade) with its resolved value and source, by key."""
        stored = self.cascade(tenant_id, project_id, user_id)
        names = set(KEYS) | {k for _, values in stored.scopes for k in values
                             if _engine_key(k) is not None}
        return {name: stored.resolve_with_source(name) for name in sorted(names)}

    def _check_scope(self, tenant_id: str, scope: SettingScope) -> None:
        if scope.level is SettingLevel.PROJECT:
            self._identity.get_project(tenant_id, scope.id)
        elif scope.level is SettingLevel.USER:
            self._identity.get_user(tenant_id, scope.id)


class SettingsApi:
    """Read access for one (tenant, project, user): what an engine sees through
    ``context.settings()``. The first value asked for reads every value stored in the
    cascade at once (one store read); every later one, of any key, resolves from that read:
    an instance (one lifecycle call, one turn) sees the settings as they were at its first
    read, and a value changed meanwhile applies from the next. Without a service
    (``SettingsApi()``, ``defaults()``) every key has its default."""

    def __init__(self, service: SettingsService | None = None, tenant_id: str = "",
                 project_id: str | None = None, user_id: str | None = None) -> None:
        self.service = service
        self.tenant_id, self.project_id, self.user_id = tenant_id, project_id, user_id
        self._stored: StoredCascade | None = None
        self._seen: dict[str, Any] = {}

    @classmethod
    def for_process(cls, service: SettingsService, process: ThinkProcess) -> SettingsApi:
        """The scope of a process: its tenant, its (session's) project, its user."""
        return cls(service, process.tenant_id, process.project_id, process.user_id)

    @classmethod
    def defaults(cls) -> SettingsApi:
        """Every key at its default (no store): tests, and callers outside any tenant."""
        return cls(None)

    def get(self, key: str) -> Any:
        """The resolved value; raises ``InvalidInput`` for an unknown key."""
        if key not in self._seen:
            if self.service is None:
                self._seen[key] = setting_key(key).default
            else:
                self._seen[key] = self._read(self.service).resolve_with_source(key)[0]
        return self._seen[key]

    def without_user(self) -> SettingsApi:
        """The settings of the tenant and project alone (a project's own, such as its
        embedding profile), resolved from this instance's read: the same moment's values,
        and no second store read."""
        view = SettingsApi(self.service, self.tenant_id, self.project_id, None)
        if self.service is not None:
            stored = self._read(self.service)
            view._stored = StoredCascade(stored.tenant_id, [
                (scope, values) for scope, values in stored.scopes
                if scope.level is not SettingLevel.USER])
        return view

    def _read(self, service: SettingsService) -> StoredCascade:
        if self._stored is None:
            self._stored = service.cascade(self.tenant_id, self.project_id, self.user_id)
        return self._stored

    def model_for(self, engine: str) -> str | None:
        """The model for ``engine``: ``<engine>.model``, else ``llm.model``, else None (the
        deployment's default)."""
        model: str | None = self.get(f"{engine}{ENGINE_MODEL_SUFFIX}")
        return model if model is not None else self.get("llm.model")
