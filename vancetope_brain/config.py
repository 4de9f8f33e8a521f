"""Configuration from environment variables (12-factor). Nothing set means embedded.

Every variable is listed in ``VARIABLES`` with its default and meaning; the
README's configuration table and ``docs/configuration.md`` are checked
against it by ``tests/test_config.py``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vancetope_brain.errors import ConfigError

PRIVATE_DIR = 0o700
"""Mode of every directory Vancetope creates for its data (the data directory, the SQLite
file's folder, attachments); the files in them are created 0600."""


def write_private(path: Path, text: str) -> None:
    """Write ``path`` (0600, its missing folders ``PRIVATE_DIR``), whatever the umask: a
    token, or a record saying where one lies."""
    path.parent.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)

def redacted_url(url: str | None) -> str:
    """A URL without its user and password (``scheme://***@host…``), for logs and errors."""
    if not url or "@" not in url:
        return url or ""
    scheme, rest = url.split("://", 1)
    return f"{scheme}://***@{rest.rsplit('@', 1)[1]}"


VARIABLES: dict[str, tuple[str, str]] = {
    # name: (default, meaning)
    "VANCETOPE_DATA_DIR": ("./.vancetope", "Where the embedded shape keeps its SQLite file, token and attachments; a relative path is taken from the folder the process starts in, once, at start."),
    "VANCETOPE_STORE_URL": ("sqlite:///<data dir>/vancetope.db", "`sqlite:///PATH`, `postgresql://USER@HOST:PORT/DB` (libpq URL; `?pool_max=N` caps one OS process's connections, default 10) or `mongodb://HOST/DB`."),
    "VANCETOPE_REDIS_URL": ("(unset: in-process fakeredis)", "Redis for lane leases, wake coalescing and stream events."),
    "VANCETOPE_REDIS_MAX_CONNECTIONS": ("500", "Connections to `VANCETOPE_REDIS_URL` one OS process opens at most, and as many again to a Redis broker (kombu's pool, whose own cap is 10: a gevent worker acks each task from its greenlet); its threads share them, and a command that would need one more fails as if Redis were down (redis-py's own cap is 100). Keep it above a worker's pool threads when turns wait on client tools (each waiting call holds one)."),
    "VANCETOPE_BROKER_URL": ("the Redis URL, or `memory://` when embedded", "Celery broker."),
    "VANCETOPE_LANE_SHARDS": ("8", "Number of lane queues `lanes.0 … lanes.N-1`; a process always maps to the same one."),
    "VANCETOPE_LEASE_TTL": ("10", "Seconds a lane lease lives without a heartbeat (renewed every TTL/3)."),
    "VANCETOPE_SHARD_LINGER_MS": ("20", "Milliseconds a shard task whose round is over waits for a wake of its shard (one blocking Redis read) before it ends, so a steer that arrives meanwhile runs without a Celery message; only while nothing waits and no other shard's task waits for a worker, ended early when one is queued; at most 500 (a task takes no turn after 0.5 s anyway); `0` ends at once."),
    "VANCETOPE_SWEEP_INTERVAL": ("5", "Seconds between sweeper runs (scheduled by the workers, one per interval across the cluster)."),
    "VANCETOPE_HOUSEKEEPING_INTERVAL": ("30", "Seconds between housekeeping runs (beat): due e-mail batches, inbox auto-archive, probes of unhealthy MCP servers, deletion of service processes closed past `VANCETOPE_SERVICE_RETENTION`, the retention purge (`retention.*` settings)."),
    "VANCETOPE_SWEEP_AGE": ("3", "A pending message older than this many seconds with no live lease is re-woken; committed events still unpublished after it are published by the sweeper."),
    "VANCETOPE_MAX_ATTEMPTS": ("3", "Turns a message may be in that never complete (its worker dies or freezes) before it is set aside as a dead letter; also bounds a start or lifecycle call that never completes."),
    "VANCETOPE_MAX_ENGINE_FAILURES": ("3", "Consecutive turns whose engine raises before the process is closed FAILED; a turn that succeeds resets the count."),
    "VANCETOPE_PRESENCE_TTL": ("30", "Seconds a client connection counts as present without renewal; a gateway that dies takes this long to count as gone."),
    "VANCETOPE_WORKER_CONCURRENCY": ("4", "Worker threads of the embedded in-process Celery worker."),
    "VANCETOPE_HOST": ("127.0.0.1", "Address `vancetope serve` binds."),
    "VANCETOPE_PORT": ("8765", "Port `vancetope serve` binds (1–65535; 0: any free port, printed at start)."),
    "VANCETOPE_URL": ("(unset)", "The server `vancetope chat` connects to, e.g. `ws://127.0.0.1:8801/ws`; by default the URL `vancetope serve` recorded (docs/configuration.md \"Finding the server\"), else `ws://VANCETOPE_HOST:VANCETOPE_PORT/ws`."),
    "VANCETOPE_TOKEN": ("(unset)", "The API token `vancetope chat` signs in with (never logged); by default the one in `DATA_DIR/token`."),
    "VANCETOPE_TOKEN_RECHECK": ("5", "Seconds within which a revoked token stops working on sockets already open: a gateway re-reads a connection's token at most this often (on its next frame, and in the background for idle sockets), then refuses the frame and closes the socket with 1008."),
    "VANCETOPE_MAX_SOCKETS": ("10000", "Open WebSockets one gateway process holds (its socket hub; an idle one costs memory, no thread); one more is refused with HTTP 503 `unavailable` before the upgrade, for a load balancer to retry elsewhere."),
    "VANCETOPE_FRAME_THREADS": ("32", "Threads of one gateway process that serve WebSocket frames (each socket's frames one at a time, in order): how many frames it can be waiting on the store, Redis or the broker for at once."),
    "VANCETOPE_HEADER_TIMEOUT": ("10", "Seconds a client may take to send a request's line and headers (and, on `vancetope serve`, each read of a body) before the gateway closes the connection, so half-sent requests cannot hold its threads."),
    "VANCETOPE_MAX_FRAME_BYTES": ("65536", "Largest WebSocket frame accepted; larger closes the socket with 1009."),
    "VANCETOPE_FRAME_RATE": ("50", "Frames per second one connection may send, sustained; every frame counts, before it is parsed (over it: `rate_limited`)."),
    "VANCETOPE_FRAME_BURST": ("200", "Frames one connection may send in a burst above `VANCETOPE_FRAME_RATE`; a client that keeps going as far again is closed with 1008."),
    "VANCETOPE_MAX_CONNECTIONS_PER_USER": ("32", "Open WebSocket connections of one user across all gateways; one more is refused with HTTP 429 `limit_exceeded` before the upgrade."),
    "VANCETOPE_MAX_CONNECTIONS_PER_IP": ("256", "Open WebSocket connections from one client address to one gateway process (behind a proxy: the proxy's address unless ProxyFix is configured); one more is refused with HTTP 429."),
    "VANCETOPE_MAX_SESSIONS_PER_USER": ("100", "Sessions of one user that are not CLOSED (OPEN or SUSPENDED); one more is refused with `limit_exceeded`."),
    "VANCETOPE_MAX_PROCESSES_PER_SESSION": ("64", "Processes of one session that are not CLOSED, workers spawned by engines included; one more is refused with `limit_exceeded` (a tool error for a spawning model)."),
    "VANCETOPE_MAX_PENDING_ITEMS_PER_PROCESS": ("100", "PENDING Inbox items one process has posted; one more is refused with `limit_exceeded` (a tool error for the model)."),
    "VANCETOPE_MAX_DEFINITIONS": ("100", "Recipes a tenant may store across its tenant and project levels (likewise strategies, and templates); one more is refused with `limit_exceeded`."),
    "VANCETOPE_EVENT_LOG_MAX": ("10000", "Events kept per session for reconnecting clients."),
    "VANCETOPE_EVENT_LOG_TTL": ("86400", "Seconds a session's event log outlives its last event."),
    "VANCETOPE_CHAT_CACHE_LINES": ("120000", "Committed chat lines a worker process keeps in memory (`engines/chat_cache.py`), of the processes whose turns it ran most recently, so a turn reads from the store only the lines committed since (about 2.4 KB each with the model messages converted from them: 120,000 lines are at most ~290 MB); `0` reads every turn's history from the store. The default holds 100 chats of 1,000 lines and their growth: a worker runs turns of every chat of its shards, and a chat the cache cannot hold is read back from the store on every turn (a 1,000-line chat's turn then costs ~7× a short chat's; `benchmarks/README.md`, \"Issue 31, target 2\")."),
    "VANCETOPE_TOKEN_FLUSH_MS": ("5", "Milliseconds a worker process gathers the tokens its turns stream before it publishes them, all in one Redis script call, a process's tokens since the last flush merged into one `token` event (at most 10,000 chunks wait; a turn that streams one more publishes them itself); `0` publishes each token at once."),
    "OPENAI_API_KEY": ("(unset)", "API key of the OpenAI-compatible endpoint; unset with no base URL means the offline demo model."),
    "OPENAI_BASE_URL": ("(unset)", "Base URL of any OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp, Azure …)."),
    "VANCETOPE_LLM_MODEL": ("gpt-4o-mini", "Model name sent to the endpoint."),
    "VANCETOPE_LLM_PROFILES": ("(unset: only the profile `default`)", "Path of a YAML file of further LLM endpoint profiles that recipes and settings can name (see docs/configuration.md)."),
    "VANCETOPE_LLM_TIMEOUT": ("60", "Seconds before one LLM request times out."),
    "VANCETOPE_LLM_MAX_RETRIES": ("2", "Retries of a failed LLM request (connection errors, 429, 5xx)."),
    "VANCETOPE_LLM_TOOLS": ("true", "`false`: the model (of the profile `default`) has no tool calling, so it is offered no tools and answers in plain text (Arthur then says once that delegating needs a model with tools); an endpoint that refuses tools is found out either way."),
    "VANCETOPE_LLM_TEXT_TOOL_CALLS": ("auto", "Whether a tool call the model (of the profile `default`) writes as text (```json {\"name\": …, \"arguments\": …}```, bare JSON, `<tool_call>…</tool_call>`) counts as a call when it names an offered tool and its arguments validate: `auto` (yes, except at OpenAI's and Azure's endpoints, whose models call tools natively), `true` or `false`."),
    "VANCETOPE_DEMO_TOKEN_DELAY": ("0.02", "Seconds the offline demo model pauses between the words it streams, so a newcomer sees streaming; `0` streams at once."),
    "VANCETOPE_HEALTH_FILE": ("(unset: none)", "A file a worker touches every 5 s while it consumes, and beat on every tick (at least every 5 s): a liveness probe for their platform, `vancetope health FILE`."),
    "VANCETOPE_LOG_LEVEL": ("INFO", "Python log level."),
    "VANCETOPE_LOG_FORMAT": ("text", "`text` (one line: time, level, logger, message, and the turn's ids) or `json` (JSON lines with the same fields; the Procfile sets it) for every process's log (docs/operations.md \"Logs\")."),
    "VANCETOPE_METRICS_PORT": ("(unset: no endpoint)", "Port a worker pod serves Prometheus metrics on (`/metrics`, from its main process; the Procfile sets `$PORT` where the platform gives the process one — honcho gives each process its own — else 9540). The gateway serves `/metrics` on its own port."),
    "VANCETOPE_METRICS_TOKEN": ("(unset: open)", "Bearer token the gateway's `/metrics` asks for; unset, it answers anyone (it holds no tenant data: keep it to the cluster network)."),
    "PROMETHEUS_MULTIPROC_DIR": ("(unset: each process counts alone)", "An empty directory where forked processes (gunicorn workers, Celery prefork children) write their metrics so one scrape sums them; the Procfile makes a fresh one per start (prometheus-client's own variable)."),
    "OTEL_EXPORTER_OTLP_ENDPOINT": ("(unset: tracing off)", "OpenTelemetry collector traces are exported to (OTLP over HTTP, e.g. `http://otel-collector:4318`); the exporter's other `OTEL_*` variables apply (`OTEL_SERVICE_NAME`, `OTEL_EXPORTER_OTLP_HEADERS` …)."),
    "VANCETOPE_MCP_SERVERS": ("(unset: no MCP servers)", "Path of a YAML or JSON file listing the MCP servers whose tools engines may call (see docs/configuration.md)."),
    "VANCETOPE_TOOL_PROBE_BACKOFF": ("30", "Seconds after an MCP server or tool is marked DOWN or DEGRADED until the background probe (housekeeping) tries it; doubled after each failed probe."),
    "VANCETOPE_TOOL_PROBE_BACKOFF_MAX": ("600", "Longest wait, in seconds, between two probes of an unhealthy MCP server or tool."),
    "VANCETOPE_SCHEDULE_MIN_INTERVAL": ("60", "Seconds at least between two ticks of a schedule's cron expression (a shorter one is refused, `invalid_schedule`); below 60, a sixth field of seconds is allowed (for tests: production keeps 60 or more)."),
    "VANCETOPE_SERVICE_RETENTION": ("604800", "Seconds a CLOSED service process (agrajag's diagnoses, in the hidden system sessions) is kept, with its chat, before housekeeping deletes it; default 7 days."),
    "VANCETOPE_DOWN_TOOLS": ("hide", "What the model sees of a DOWN MCP server's or tool's tools: `hide` leaves them out of the manifest, `show` offers them with their status; calls fail at once either way."),
    "VANCETOPE_PUBLIC_URL": ("http://<host>:<port>", "Base URL clients reach the gateway at; used in e-mailed links and signed attachment URLs."),
    "VANCETOPE_SECRET_KEY": ("(unset: generated once into `<data dir>/secret.key`)", "Key that signs attachment URLs; set the same value on every gateway and worker of a cluster."),
    "VANCETOPE_ATTACHMENTS_DIR": ("<data dir>/attachments", "Where inbox attachments (OUTPUT_IMAGE, OUTPUT_DOCUMENT) and the bytes of knowledge documents (`<tenant>/documents/<id>/<version>`) are stored; shared by all gateways and workers."),
    "VANCETOPE_ATTACHMENT_URL_TTL": ("300", "Seconds a signed attachment URL stays valid."),
    "VANCETOPE_WEBHOOK_ALLOW_PRIVATE": ("false", "Operator only: `true` lets webhooks go to loopback, private, link-local and other non-public addresses (a test receiver, an internal service). Off, such destinations are refused at create and at every attempt (docs/architecture.md, \"Webhooks\")."),
    "VANCETOPE_WEBHOOK_RETRY_SCHEDULE": ("0,5,300,1800,7200,18000,36000,36000", "Seconds before each webhook attempt, each counted from the failure of the one before (the first from the event); after the last fails the delivery is dead. The default is the Standard Webhooks suggestion (about 27.5 hours)."),
    "VANCETOPE_WEBHOOK_TIMEOUT": ("10", "Seconds a webhook attempt waits to connect and for each read; the whole attempt is cut at this plus 5."),
    "VANCETOPE_SMTP_HOST": ("(unset: no e-mail notifications)", "SMTP server for e-mail notifications."),
    "VANCETOPE_SMTP_PORT": ("587", "SMTP port."),
    "VANCETOPE_SMTP_STARTTLS": ("true", "Upgrade the SMTP connection with STARTTLS (`true`/`false`)."),
    "VANCETOPE_SMTP_USER": ("(unset: no login)", "SMTP login name."),
    "VANCETOPE_SMTP_PASSWORD": ("(unset)", "SMTP password (never logged)."),
    "VANCETOPE_SMTP_FROM": ("vancetope@localhost", "Sender address of notification e-mails."),
    "VANCETOPE_SMTP_TIMEOUT": ("10", "Seconds before one SMTP conversation times out."),
}


@dataclass(frozen=True)
class SmtpConfig:
    """Where notification e-mails go out. ``password`` is never part of ``repr``."""

    host: str
    port: int
    starttls: bool
    user: str | None
    password: str | None = field(default=None, repr=False)
    sender: str = "vancetope@localhost"
    timeout: float = 10.0


@dataclass(frozen=True)
class Config:
    """The resolved configuration of one process."""

    data_dir: Path
    store_url: str
    redis_url: str | None
    broker_url: str
    lane_shards: int
    lease_ttl: float
    sweep_interval: float
    housekeeping_interval: float
    sweep_age: float
    max_attempts: int
    max_engine_failures: int
    presence_ttl: float
    worker_concurrency: int
    host: str
    port: int
    max_frame_bytes: int
    max_definitions: int
    event_log_max: int
    event_log_ttl: int
    openai_api_key: str | None
    openai_base_url: str | None
    llm_model: str
    llm_timeout: float
    llm_max_retries: int
    log_level: str
    mcp_servers_file: Path | None = None
    llm_profiles_file: Path | None = None
    llm_tools: bool = True
    llm_text_tool_calls: bool | None = None
    """None: ``auto`` (``llm.endpoint.native_tool_calls`` decides)."""
    public_url: str = ""
    secret_key: str | None = None
    attachments_dir: Path = Path("./.vancetope/attachments")
    attachment_url_ttl: int = 300
    smtp: SmtpConfig | None = None
    frame_rate: float = 50.0
    frame_burst: int = 200
    max_connections_per_user: int = 32
    max_connections_per_ip: int = 256
    max_sessions_per_user: int = 100
    max_processes_per_session: int = 64
    max_pending_items_per_process: int = 100
    token_recheck: float = 5.0
    max_sockets: int = 10000
    frame_threads: int = 32
    header_timeout: float = 10.0
    demo_token_delay: float = 0.0
    token_flush: float = 0.005
    chat_cache_lines: int = 120_000
    redis_max_connections: int = 500
    tool_probe_backoff: float = 30.0
    tool_probe_backoff_max: float = 600.0
    show_down_tools: bool = False
    log_format: str = "text"
    metrics_port: int | None = None
    metrics_token: str | None = field(default=None, repr=False)
    service_retention: float = 604800.0
    schedule_min_interval: float = 60.0
    health_file: Path | None = None
    shard_linger: float = 0.02
    webhook_allow_private: bool = False
    webhook_retry_schedule: tuple[float, ...] = (0, 5, 300, 1800, 7200, 18000, 36000, 36000)
    webhook_timeout: float = 10.0

    @property
    def embedded(self) -> bool:
        """True when no Redis is configured: broker, locks and events run in this process."""
        return self.redis_url is None

    @property
    def llm_configured(self) -> bool:
        """True when an OpenAI-compatible endpoint is configured (else the demo model runs)."""
        return bool(self.openai_api_key or self.openai_base_url)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Config:
        """Read the configuration; raises ``ConfigError`` naming the bad variable."""
        env = os.environ if env is None else env
        # Absolute once, here: every path derived from it (the SQLite file, the token, the
        # secret key, attachments) then means the same file to every library, whatever it
        # resolves a relative path against (Flask's send_file: the package's folder).
        data_dir = Path(env.get("VANCETOPE_DATA_DIR", "./.vancetope")).resolve()
        redis_url = env.get("VANCETOPE_REDIS_URL") or None
        return cls(
            data_dir=data_dir,
            store_url=env.get("VANCETOPE_STORE_URL") or f"sqlite:///{data_dir / 'vancetope.db'}",
            redis_url=redis_url,
            broker_url=env.get("VANCETOPE_BROKER_URL") or redis_url or "memory://localhost/",
            lane_shards=_number(env, "VANCETOPE_LANE_SHARDS", int, 1),
            lease_ttl=_number(env, "VANCETOPE_LEASE_TTL", float, 0.5),
            sweep_interval=_number(env, "VANCETOPE_SWEEP_INTERVAL", float, 0.1),
            shard_linger=_number(env, "VANCETOPE_SHARD_LINGER_MS", float, 0.0, 500.0) / 1000,
            housekeeping_interval=_number(env, "VANCETOPE_HOUSEKEEPING_INTERVAL", float, 0.1),
            sweep_age=_number(env, "VANCETOPE_SWEEP_AGE", float, 0.0),
            max_attempts=_number(env, "VANCETOPE_MAX_ATTEMPTS", int, 1),
            max_engine_failures=_number(env, "VANCETOPE_MAX_ENGINE_FAILURES", int, 1),
            presence_ttl=_number(env, "VANCETOPE_PRESENCE_TTL", float, 1.0),
            worker_concurrency=_number(env, "VANCETOPE_WORKER_CONCURRENCY", int, 1),
            host=env.get("VANCETOPE_HOST", "127.0.0.1"),
            port=_number(env, "VANCETOPE_PORT", int, 0, MAX_PORT),
            max_frame_bytes=_number(env, "VANCETOPE_MAX_FRAME_BYTES", int, 1024),
            max_definitions=_number(env, "VANCETOPE_MAX_DEFINITIONS", int, 1),
            event_log_max=_number(env, "VANCETOPE_EVENT_LOG_MAX", int, 10),
            event_log_ttl=_number(env, "VANCETOPE_EVENT_LOG_TTL", int, 60),
            openai_api_key=env.get("OPENAI_API_KEY") or None,
            openai_base_url=env.get("OPENAI_BASE_URL") or None,
            llm_model=env.get("VANCETOPE_LLM_MODEL", "gpt-4o-mini"),
            llm_timeout=_number(env, "VANCETOPE_LLM_TIMEOUT", float, 0.1),
            llm_max_retries=_number(env, "VANCETOPE_LLM_MAX_RETRIES", int, 0),
            log_level=env.get("VANCETOPE_LOG_LEVEL", "INFO").upper(),
            mcp_servers_file=Path(v) if (v := env.get("VANCETOPE_MCP_SERVERS")) else None,
            llm_profiles_file=Path(p) if (p := env.get("VANCETOPE_LLM_PROFILES")) else None,
            llm_tools=_choice(env, "VANCETOPE_LLM_TOOLS", ("true", "false")) == "true",
            llm_text_tool_calls={"auto": None, "true": True, "false": False}[_choice(
                env, "VANCETOPE_LLM_TEXT_TOOL_CALLS", ("auto", "true", "false"))],
            public_url=(env.get("VANCETOPE_PUBLIC_URL") or "").rstrip("/"),
            secret_key=env.get("VANCETOPE_SECRET_KEY") or None,
            attachments_dir=Path(env.get("VANCETOPE_ATTACHMENTS_DIR")
                                 or data_dir / "attachments").resolve(),
            attachment_url_ttl=_number(env, "VANCETOPE_ATTACHMENT_URL_TTL", int, 1),
            smtp=_smtp(env),
            frame_rate=_number(env, "VANCETOPE_FRAME_RATE", float, 0.1),
            frame_burst=_number(env, "VANCETOPE_FRAME_BURST", int, 1),
            max_connections_per_user=_number(env, "VANCETOPE_MAX_CONNECTIONS_PER_USER", int, 1),
            max_connections_per_ip=_number(env, "VANCETOPE_MAX_CONNECTIONS_PER_IP", int, 1),
            max_sessions_per_user=_number(env, "VANCETOPE_MAX_SESSIONS_PER_USER", int, 1),
            max_processes_per_session=_number(env, "VANCETOPE_MAX_PROCESSES_PER_SESSION", int, 1),
            max_pending_items_per_process=_number(
                env, "VANCETOPE_MAX_PENDING_ITEMS_PER_PROCESS", int, 1),
            token_recheck=_number(env, "VANCETOPE_TOKEN_RECHECK", float, 0.1),
            max_sockets=_number(env, "VANCETOPE_MAX_SOCKETS", int, 1),
            frame_threads=_number(env, "VANCETOPE_FRAME_THREADS", int, 1),
            header_timeout=_number(env, "VANCETOPE_HEADER_TIMEOUT", float, 0.1),
            demo_token_delay=_number(env, "VANCETOPE_DEMO_TOKEN_DELAY", float, 0.0),
            redis_max_connections=_number(env, "VANCETOPE_REDIS_MAX_CONNECTIONS", int, 2),
            token_flush=_number(env, "VANCETOPE_TOKEN_FLUSH_MS", float, 0.0, 1000.0) / 1000,
            chat_cache_lines=_number(env, "VANCETOPE_CHAT_CACHE_LINES", int, 0),
            tool_probe_backoff=_number(env, "VANCETOPE_TOOL_PROBE_BACKOFF", float, 0.1),
            tool_probe_backoff_max=_number(env, "VANCETOPE_TOOL_PROBE_BACKOFF_MAX", float, 0.1),
            show_down_tools=_choice(env, "VANCETOPE_DOWN_TOOLS", ("hide", "show")) == "show",
            log_format=_choice(env, "VANCETOPE_LOG_FORMAT", ("text", "json")),
            metrics_port=_number(env, "VANCETOPE_METRICS_PORT", int, 0)
            if env.get("VANCETOPE_METRICS_PORT") else None,
            metrics_token=env.get("VANCETOPE_METRICS_TOKEN") or None,
            service_retention=_number(env, "VANCETOPE_SERVICE_RETENTION", float, 1.0),
            schedule_min_interval=_number(env, "VANCETOPE_SCHEDULE_MIN_INTERVAL", float, 1.0),
            health_file=Path(h) if (h := env.get("VANCETOPE_HEALTH_FILE")) else None,
            webhook_allow_private=_choice(
                env, "VANCETOPE_WEBHOOK_ALLOW_PRIVATE", ("true", "false")) == "true",
            webhook_retry_schedule=_schedule(env, "VANCETOPE_WEBHOOK_RETRY_SCHEDULE"),
            webhook_timeout=_number(env, "VANCETOPE_WEBHOOK_TIMEOUT", float, 0.1, 60.0),
        )

    def base_url(self) -> str:
        """Where clients reach this deployment (``VANCETOPE_PUBLIC_URL`` or host and port)."""
        return self.public_url or f"http://{self.host}:{self.port}"


def _smtp(env: Mapping[str, str]) -> SmtpConfig | None:
    host = env.get("VANCETOPE_SMTP_HOST")
    if not host:
        return None
    starttls = env.get("VANCETOPE_SMTP_STARTTLS", "true").lower()
    if starttls not in ("true", "false"):
        raise ConfigError(f"VANCETOPE_SMTP_STARTTLS={starttls!r} must be true or false")
    return SmtpConfig(host=host, port=_number(env, "VANCETOPE_SMTP_PORT", int, 1),
                      starttls=starttls == "true", user=env.get("VANCETOPE_SMTP_USER") or None,
                      password=env.get("VANCETOPE_SMTP_PASSWORD") or None,
                      sender=env.get("VANCETOPE_SMTP_FROM") or "vancetope@localhost",
                      timeout=_number(env, "VANCETOPE_SMTP_TIMEOUT", float, 0.1))


def _schedule(env: Mapping[str, str], name: str) -> tuple[float, ...]:
    raw = env.get(name) or VARIABLES[name][0]
    try:
        seconds = tuple(float(part) for part in raw.split(","))
    except ValueError as e:
        raise ConfigError(f"{name}={raw!r} is not a comma-separated list of seconds") from e
    if not 1 <= len(seconds) <= 20 or any(s < 0 for s in seconds):
        raise ConfigError(f"{name}={raw!r} must hold 1 to 20 numbers of seconds, none negative")
    return seconds


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    value = (env.get(name) or VARIABLES[name][0]).lower()
    if value not in choices:
        raise ConfigError(f"{name}={value!r} must be one of {', '.join(choices)}")
    return value


MAX_PORT = 65535


def _number(env: Mapping[str, str], name: str, kind: type, minimum: float,
            maximum: float | None = None) -> Any:
    raw = env.get(name) or VARIABLES[name][0]
    try:
        value = kind(raw)
    except ValueError as e:
        raise ConfigError(f"{name}={raw!r} is not a valid {kind.__name__}") from e
    if value < minimum:
        raise ConfigError(f"{name}={raw!r} must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"{name}={raw!r} must be at most {maximum}")
    return value
