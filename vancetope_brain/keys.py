"""Every Redis key Vancetope uses, built in one place.

| key                         | type   | TTL                     | meaning                                        |
|-----------------------------|--------|-------------------------|------------------------------------------------|
| ``vt:lease:{pid}``          | string | lease TTL, renewed      | lane lease (redis-py Lock token) of a process  |
| ``vt:ready:{shard}``        | zset   | none (≤ one member per process of the shard) | ``tenant/pid`` of woken processes → wake time (µs): the shard's tasks run them, oldest first |
| ``vt:shard-queued:{shard}`` | string | 2 × lease TTL; linger + 1 s | a shard task for the shard is queued and has not started (``1``), or one lingers on it (``linger``) |
| ``vt:shard-bell:{shard}``   | list   | 2 × lease TTL           | rung (RPUSH) for a task lingering on the shard: a wake of it, or another shard's task queued |
| ``vt:lingering``            | set    | none (≤ one member per shard) | shards a task lingers on |
| ``vt:recheck:{pid}``        | string | lease TTL               | a task found the lease taken: holder, look again |
| ``vt:wake-later:{pid}``     | string | until the task is due   | a delayed lane-turn task (lease take-over) is queued |
| ``vt:sweep-slot``           | string | sweep interval          | a sweep ran this interval (one per cluster)    |
| ``vt:evseq:{sid}``          | string | event log TTL           | last event sequence number of a session        |
| ``vt:evorigin:{sid}``       | string | event log TTL           | first sequence number of the current log       |
| ``vt:events:{sid}``         | stream | event log TTL, capped   | the session's recent events, id ``{seq}-0``    |
| ``vt:evpub:{sid}``          | zset   | event log TTL, capped   | outbox event ids published into the log → seq  |
| ``vt:presence:{sid}``       | zset   | presence TTL, renewed   | bound connections → expiry time (epoch s)      |
| ``vt:presence-index``       | zset   | none                    | ``tenant/sid`` of sessions with a bound client |
| ``vt:activity``             | zset   | none                    | ``tenant/sid`` → idle deadline (epoch s)       |
| ``vt:session-lock:{sid}``   | string | 5 s                     | serializes bind / last-client-gone per session |
| ``vt:client-tools:{sid}``   | hash   | 1 day, renewed          | connection id → JSON list of its tool manifests |
| ``vt:tool-result:{call}``   | list   | 5 min                   | the one result of a client tool call           |
| ``vt:tool-call:{call}``     | string | 5 min                   | a client tool call's caller once it timed out: a late result goes to its inbox |
| ``vt:user-presence:{t}/{u}``| zset   | presence TTL, renewed   | a user's connections ``id:notifyMode`` → expiry |
| ``vt:evseq|evorigin|events:user.{t}.{u}`` | as above | event log TTL | the user's feed (inbox pushes), a log like a session's |
| ``vt:service-job:{t}/{p}/{svc}/{subject}`` | string | service job TTL | the one job of a service for a subject (``queued``, then its process id): later jobs fold into it |
| ``vt:system-session-lock:{t}/{p}/{svc}`` | string | 10 s  | serializes finding or creating a system session |
| ``vt:interrupt:{pid}``     | string | 60 s                    | the epoch of the process's turn a user stopped (``process-interrupt``): it stops at its next model call |
| ``vt:workers``              | hash   | 16 s, renewed           | worker name → JSON ``{queues, until}``: the heartbeat of each consuming worker (``lanes/consumers.py``) |

Nothing else is written by Vancetope (Celery's broker keys are Celery's:
``lanes.*``, ``maintenance``, ``_kombu.*``, ``unacked*``).
``tests/lanes/test_redis_keys.py`` connects a client, runs turns and disconnects on the real
Redis, and asserts the exact key set, while connected and left behind.

Pub/sub channels (they hold nothing): ``vt:news:{db}:{sid}`` (``event_news``: the events just
appended to a session's log), ``vt:doorbell:{listener}`` (``listener_doorbell``: wakes one gateway
listener) and ``vt:interrupts:{db}`` (``interrupts``: ``tenant/pid/epoch`` of a turn a user
stopped, heard by every worker process).
"""

PREFIX = "vt:"


def lease(process_id: str) -> str:
    return f"{PREFIX}lease:{process_id}"


def ready(shard: int | str) -> str:
    """A shard's ready set; ``"*"`` gives the pattern of every shard's."""
    return f"{PREFIX}ready:{shard}"


def shard_queued(shard: int | str) -> str:
    """A shard's queued flag; ``"*"`` gives the pattern of every shard's."""
    return f"{PREFIX}shard-queued:{shard}"


def shard_bell(shard: int | str) -> str:
    """The list a task lingering on ``shard`` waits on (BLPOP); ``""`` gives the prefix."""
    return f"{PREFIX}shard-bell:{shard}"


LINGERING = f"{PREFIX}lingering"


def wake_later(process_id: str) -> str:
    return f"{PREFIX}wake-later:{process_id}"


SWEEP_SLOT = f"{PREFIX}sweep-slot"
WORKERS = f"{PREFIX}workers"


def recheck(process_id: str) -> str:
    return f"{PREFIX}recheck:{process_id}"


def event_seq(session_id: str) -> str:
    return f"{PREFIX}evseq:{session_id}"


def event_origin(session_id: str) -> str:
    return f"{PREFIX}evorigin:{session_id}"


def event_published(session_id: str) -> str:
    """The outbox events already in the session's log (their ids, scored by seq), so a
    publish repeated after a crash adds nothing; capped like the log."""
    return f"{PREFIX}evpub:{session_id}"


def presence(session_id: str) -> str:
    return f"{PREFIX}presence:{session_id}"


PRESENCE_INDEX = f"{PREFIX}presence-index"
ACTIVITY = f"{PREFIX}activity"


def session_lock(session_id: str) -> str:
    return f"{PREFIX}session-lock:{session_id}"


def client_tools(session_id: str) -> str:
    return f"{PREFIX}client-tools:{session_id}"


def tool_result(call_id: str) -> str:
    return f"{PREFIX}tool-result:{call_id}"


def tool_call(call_id: str) -> str:
    return f"{PREFIX}tool-call:{call_id}"


def events(session_id: str) -> str:
    return f"{PREFIX}events:{session_id}"


def event_news(db: int, session_id: str) -> str:
    """Pub/sub channel (not a key): the events appended to the session's log in Redis
    database ``db``, each time (``events/bus.py``); gateway listeners subscribe to the logs
    they follow. Redis's channels are not per database, so the name holds it (as kombu's
    fanout prefix does): deployments or test runs on one server, each in a database of its
    own, never hear each other's events."""
    return f"{PREFIX}news:{db}:{session_id}"


def interrupt(process_id: str) -> str:
    return f"{PREFIX}interrupt:{process_id}"


def interrupts(db: int) -> str:
    """Pub/sub channel (not a key): turns users stopped (``events/interrupts.py``), in Redis
    database ``db`` (channels are not per database, as ``event_news`` says)."""
    return f"{PREFIX}interrupts:{db}"


def listener_doorbell(listener_id: str) -> str:
    """Pub/sub channel (not a key) of one gateway listener: a message there ends its wait,
    so it takes up a newly followed session at once."""
    return f"{PREFIX}doorbell:{listener_id}"


def user_presence(tenant_id: str, user_id: str) -> str:
    return f"{PREFIX}user-presence:{tenant_id}/{user_id}"


def user_feed(tenant_id: str, user_id: str) -> str:
    """The id of a user's event log (inbox pushes), used where a session id goes: session ids
    start with ``ses_``, so the two never meet."""
    return f"user.{tenant_id}.{user_id}"


def uploads(tenant_id: str, user_id: str) -> str:
    """The count of a user's document uploads in the current minute (expires with it)."""
    return f"{PREFIX}uploads:{tenant_id}:{user_id}"


def openai_requests(tenant_id: str, user_id: str) -> str:
    """The count of a user's requests to the OpenAI-compatible door in the current minute
    (expires with it)."""
    return f"{PREFIX}openai:requests:{tenant_id}:{user_id}"


def openai_replies(tenant_id: str, user_id: str) -> str:
    """A zset of a user's chat completions under way (id → the time its wait ends): the
    OpenAI-compatible door's cap on concurrent replies."""
    return f"{PREFIX}openai:replies:{tenant_id}:{user_id}"


def openai_tenant_replies(tenant_id: str) -> str:
    """A zset of a tenant's chat completions under way (id → the time its wait ends): the
    OpenAI-compatible door's cap on a tenant's concurrent replies."""
    return f"{PREFIX}openai:tenant-replies:{tenant_id}"


def openai_gateway_replies(gateway: str) -> str:
    """A zset of the chat completions one gateway process (``host:pid``) serves (id → the
    time its wait ends): the OpenAI-compatible door's cap per gateway."""
    return f"{PREFIX}openai:gateway-replies:{gateway}"


def mcp_requests(tenant_id: str, user_id: str) -> str:
    """The count of a user's requests to the MCP server (``/mcp``) in the current minute
    (expires with it)."""
    return f"{PREFIX}mcp:requests:{tenant_id}:{user_id}"


def mcp_calls(tenant_id: str, user_id: str) -> str:
    """A zset of a user's requests to the MCP server under way (id → the time it expires):
    its cap on a user's concurrent requests."""
    return f"{PREFIX}mcp:calls:{tenant_id}:{user_id}"


def mcp_gateway_calls(gateway: str) -> str:
    """A zset of the MCP requests one gateway process (``host:pid``) serves (id → the time
    it expires): the MCP server's cap per gateway."""
    return f"{PREFIX}mcp:gateway-calls:{gateway}"


def service_job(tenant_id: str, project_id: str, service: str, subject: str) -> str:
    """The coalescing claim of a service's job for one subject (e.g. agrajag and a tool)."""
    return f"{PREFIX}service-job:{tenant_id}/{project_id}/{service}/{subject}"


def system_session_lock(tenant_id: str, project_id: str, service: str) -> str:
    return f"{PREFIX}system-session-lock:{tenant_id}/{project_id}/{service}"
