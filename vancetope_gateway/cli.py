"""``vancetope`` — serve, worker, beat, chat, docs, admin."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
from dataclasses import replace

from vancetope_brain.config import Config, redacted_url
from vancetope_brain.errors import VancetopeError
from vancetope_gateway.admin_cli import add_admin_parser, run_admin


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vancetope", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the embedded server (gateway + worker in one process)")
    serve.add_argument("--host", help="bind address (VANCETOPE_HOST)")
    serve.add_argument("--port", type=_port, help="port, 1-65535, or 0 for any free one "
                       "(VANCETOPE_PORT)")
    serve.add_argument("--data-dir", help="data directory (VANCETOPE_DATA_DIR)")

    worker = sub.add_parser("worker", help="run a Celery worker for the distributed shape")
    worker.add_argument("celery_args", nargs=argparse.REMAINDER,
                        help="extra arguments for `celery worker`, e.g. --concurrency 4")
    beat = sub.add_parser("beat", help="run Celery beat (the housekeeping schedule)")
    beat.add_argument("celery_args", nargs=argparse.REMAINDER)

    chat = sub.add_parser("chat", help="terminal chat client")
    chat.add_argument("--url", help="WebSocket URL (default: VANCETOPE_URL, else the URL "
                      "`vancetope serve` recorded in the data directory)")
    chat.add_argument("--token", help="API token (default: VANCETOPE_TOKEN or DATA_DIR/token)")
    chat.add_argument("--session", help="session id to resume (default: the last one)")
    chat.add_argument("--new", action="store_true", help="start a new session")
    chat.add_argument("--find", metavar="TEXT", help="list your sessions whose title or chat "
                      "holds every word of TEXT, and on a terminal open the one you pick")

    docs = sub.add_parser("docs", help="a project's knowledge documents: add, list, rm")
    doc_verbs = docs.add_subparsers(dest="docs_verb", required=True, metavar="VERB")
    server = argparse.ArgumentParser(add_help=False)
    server.add_argument("--project", default="default",
                        help="the project (default: 'default')")
    server.add_argument("--url", help="WebSocket URL, found as for `vancetope chat`")
    server.add_argument("--token", help="API token, found as for `vancetope chat`")
    p = doc_verbs.add_parser("add", parents=[server], help="upload files (a name already in "
                             "the project is replaced) and wait until each is READY or FAILED")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--no-wait", action="store_true", help="return once uploaded")
    doc_verbs.add_parser("list", parents=[server], help="the project's documents: id, status, "
                         "size, chunks, name")
    p = doc_verbs.add_parser("rm", parents=[server], help="delete documents (their chunks and "
                             "bytes), named by name or id")
    p.add_argument("names", nargs="+", metavar="NAME|ID")

    schemas = sub.add_parser("schemas", help="regenerate docs/protocol.md's frame table and "
                             "docs/schemas/*.json from the frame models")
    schemas.add_argument("--docs", default="docs", help="the repository's docs directory to "
                         "update (default: ./docs)")
    schemas.add_argument("--out", help="write only the JSON Schemas, into this directory "
                         "(any folder; docs/protocol.md is left alone)")

    health = sub.add_parser("health", help="liveness probe of a worker or beat: exit 0 if "
                            "FILE (their VANCETOPE_HEALTH_FILE) was touched recently")
    health.add_argument("file", help="the process's VANCETOPE_HEALTH_FILE")
    health.add_argument("--max-age", type=float, default=30.0,
                        help="seconds since the last touch that still count as alive "
                        "(default: 30)")

    add_admin_parser(sub)

    args = parser.parse_args(argv)
    try:
        config = Config.from_env()
        if args.command == "serve":
            return _serve(_override(config, args))
        if args.command in ("worker", "beat"):
            return _celery(args.command, args.celery_args)
        if args.command == "chat":
            from vancetope_gateway.chat_client import run_chat

            return run_chat(config, url=args.url, token=args.token, session_id=args.session,
                            new=args.new, find=args.find)
        if args.command == "docs":
            return _docs(config, args)
        if args.command == "schemas":
            from pathlib import Path

            from vancetope_gateway.schemas import write, write_schemas

            written = write_schemas(Path(args.out)) if args.out else write(Path(args.docs))
            for path in written:
                print(path)
            return 0
        if args.command == "health":
            return _health(args.file, args.max_age)
        return run_admin(config, args)
    except VancetopeError as e:
        print(f"vancetope: {e}", file=sys.stderr)
        return 2


def _docs(config: Config, args: argparse.Namespace) -> int:
    from pathlib import Path

    from vancetope_gateway.docs_client import DocsCommand

    command = DocsCommand(config, url=args.url, token=args.token)
    try:
        if args.docs_verb == "add":
            return command.add([Path(f) for f in args.files], args.project,
                               wait=not args.no_wait)
        if args.docs_verb == "list":
            return command.show(args.project)
        return command.remove(args.names, args.project)
    finally:
        command.close()


def _port(raw: str) -> int:
    try:
        port = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port: use 1-65535 (0: any free port)")
    return port


def _health(file: str, max_age: float) -> int:
    """Exit 0 when ``file`` was touched within ``max_age`` seconds, else 1 saying why."""
    import time

    try:
        age = time.time() - os.stat(file).st_mtime
    except FileNotFoundError:
        print(f"vancetope health: {file} does not exist (is VANCETOPE_HEALTH_FILE set for the "
              f"worker or beat, and has it started?)", file=sys.stderr)
        return 1
    if age > max_age:
        print(f"vancetope health: {file} was last touched {age:.0f} s ago (more than "
              f"{max_age:g} s): the process is stuck or gone", file=sys.stderr)
        return 1
    print(f"alive: {file} touched {age:.0f} s ago")
    return 0


def _override(config: Config, args: argparse.Namespace) -> Config:
    changes = {k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    if args.data_dir:
        env = dict(os.environ, VANCETOPE_DATA_DIR=args.data_dir)
        config = Config.from_env(env)
    return replace(config, **changes)


def _setup_logging(config: Config) -> None:
    from vancetope_brain.observability import logs, tracing

    logs.configure(config.log_level, config.log_format)
    tracing.configure("vancetope")


def _serve(config: Config) -> int:
    from vancetope_gateway.discovery import ServerLock
    from vancetope_gateway.serving import listen

    _setup_logging(config)
    # Nothing is made before the port is bound: a serve that cannot start leaves no data
    # directory behind (one that `chat` would then prefer to the running server's).
    lock = ServerLock(config.data_dir)
    try:
        # A server already running here is named before its port can clash with this one's.
        lock.take(create=False)
        with listen(config.host, config.port) as listener:
            lock.take(create=True)
            return _run(config, listener)
    finally:
        lock.release()


def _run(config: Config, listener: socket.socket) -> int:
    """Build and run the embedded server on ``listener``, with the data directory's lock held."""
    from vancetope_brain.knowledge.sample import seed_sample
    from vancetope_brain.llm.factory import describe
    from vancetope_brain.runtime import open_store
    from vancetope_gateway.app import close_app, create_app
    from vancetope_gateway.discovery import forget_server, record_server
    from vancetope_gateway.parts import build_gateway
    from vancetope_gateway.serving import make_embedded_server
    from vancetope_gateway.sockets import going_away
    from workers.celery_app import broker_ping, create_celery, enqueue_index_on, enqueue_on
    from workers.embedded import EmbeddedWorker

    # One process plays both roles: each root builds its own parts on one opened store.
    store = open_store(config.store_url)
    celery = create_celery(config, store=store)
    gateway = build_gateway(config, enqueue_on(celery), enqueue_index=enqueue_index_on(celery),
                            store=store)
    worker_parts = celery.vancetope_worker()  # built now, not by the first lane turn
    # The local user's first project gets a sample document, to ask the demo model about.
    secret, created = gateway.identity.bootstrap_local(
        config.data_dir / "token",
        on_new_project=lambda tenant, project, user: seed_sample(store, tenant, project, user))
    worker = EmbeddedWorker(celery, concurrency=config.worker_concurrency)
    worker.start()
    app = create_app(gateway, llm_description=describe(config), ping_broker=broker_ping(celery))
    server = make_embedded_server(app, listener, config.header_timeout)
    shape = "embedded" if config.embedded else f"Redis at {redacted_url(config.redis_url)}"
    host = _client_host(config.host)
    ws_url, web_url = f"ws://{host}:{server.port}/ws", f"http://{host}:{server.port}/"
    record_server(config, ws_url, os.environ)

    def _stop(signum: int, frame: object) -> None:
        def stop() -> None:
            try:
                going_away(app)  # clients resume elsewhere, or once this server is back
            finally:
                server.shutdown()

        threading.Thread(target=stop, daemon=True).start()

    # Before the banner: a Ctrl-C as soon as the addresses show stops the server cleanly.
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    print(f"Vancetope serving on http://{config.host}:{server.port} ({shape}; "
          f"store {redacted_url(config.store_url)})", flush=True)
    print(describe(config), flush=True)
    token_file = config.data_dir / "token"
    # A URL fragment never reaches a server log, but captured output is a log.
    web = f"{web_url}#token={secret}" if sys.stdout.isatty() else \
        f"{web_url}  (sign in with the token in {token_file})"
    print(f"{'Created' if created else 'Using'} the local user's token in {token_file}.\n"
          f"Terminal: vancetope chat --url {ws_url}\n"
          f"Browser:  {web}\n"
          f"Any WebSocket client: {ws_url} with header 'Authorization: Bearer <token>' "
          f"(a browser: subprotocols 'vancetope' and 'bearer.<token>')", flush=True)

    try:
        server.serve_forever()
    finally:
        forget_server(config)
        close_app(app)
        worker.stop()
        worker_parts.close()
        store.close()
    print("Vancetope stopped.", flush=True)
    return 0


def _celery(command: str, extra: list[str]) -> int:
    from workers.main import app

    base = ["worker", "--loglevel=INFO", "--prefetch-multiplier=1"] if command == "worker" \
        else ["beat", "--loglevel=INFO"]
    app.start(base + extra)
    return 0


def _client_host(host: str) -> str:
    """The address a local client uses for a server bound to ``host`` (a wildcard bind is
    reached on loopback)."""
    if host in ("0.0.0.0", "", "::"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


if __name__ == "__main__":
    sys.exit(main())
