"""The floor of the token path: the bare transport with the same libraries, no Vancetope code.

    python benchmarks/stream_floor.py --streams 500 --rounds 2

What ``llm_load.py`` offers, without the product: ``--publishers`` OS processes (as the
worker processes) each own a share of ``--streams`` Redis streams and, for each, emit
``--tokens`` tokens over ``--seconds`` seconds (500 × 100 over 2 s: 25,000 tokens/s). Like
the product's token coalescer they gather what came due and write it every ``--flush-ms``:
one redis-py pipeline per flush, one ``XADD`` per stream with tokens (a small pre-encoded
JSON body, the tokens of that interval joined, as ``llm_load.py``'s tokens: ``"<i> <µs>;"``
stamped with the token's scheduled time, so the wait for the flush counts in the delay).
The streams' schedules are spread over a token's interval, as turns that did not start
together. ``--shape threads``: a thread per stream sleeps until each of its tokens is due
and queues it, and a flusher thread writes the queue every ``--flush-ms`` (the shape of a
threads worker with the product's token coalescer, without the turn).

One server OS process (as the gateway) accepts the WebSockets (a plain socket and wsproto:
the library the gateway's hub speaks once flask-sock under gunicorn has done the handshake;
the handshake here is wsproto's own, which only the connects see) and runs one reader
thread: ``XREAD BLOCK`` over every connected stream from its last id, each entry spliced
into an ``event`` frame (``{"type":"event","data":{"seq":…,"sessionId":…,<body>}}``) and
written to its socket. (The gateway learns which logs have news from Redis pub/sub instead
of an XREAD naming all of them; that is a design step above this floor, not a library.)

This process is the client, with ``lane_turns.py``'s ``WsConn`` as ``llm_load.py``: one
socket per stream, every token checked in order, delay = arrival (``time.time_ns()``
after the ``recv``) − scheduled emission, same clock. Prints tokens/s, delay p50/p99 and
CPU µs per token of each OS process (``/proc``), Redis included.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import redis
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, Request, TextMessage

HERE = Path(__file__).resolve().parent
KEY = "floor:{}"
BODY = '{{"processId":"p","type":"token","data":{{"text":"{}"}},"at":"{}"}}'
FRAME = '{{"type":"event","data":{{"seq":{},"sessionId":"s{}",{}}}'


# ── publisher (one OS process of several) ────────────────────────────────────────────

def publisher(args: argparse.Namespace) -> None:
    """Waits for ``go <epoch seconds>`` lines on stdin; each is a round starting then."""
    client = redis.Redis.from_url(args.redis_url)
    mine = list(range(args.index, args.streams, args.publishers))
    step = args.seconds / args.tokens
    # Turns do not start in step: stream j's token i is due at start + (j/streams + i + 1)·step.
    offsets = {j: j / args.streams * step for j in mine}
    for line in sys.stdin:
        start = float(line.split()[1])
        if args.shape == "threads":
            threaded_round(args, client, mine, offsets, start)
            print("done", flush=True)
            continue
        sent = dict.fromkeys(mine, 0)
        while any(n < args.tokens for n in sent.values()):
            time.sleep(max(0.0, start - time.time()) or args.flush_ms / 1000)
            now = time.time()
            pipe = client.pipeline(transaction=False)
            for j in mine:
                due = min(args.tokens, int((now - start - offsets[j]) / step))
                if due <= sent[j]:
                    continue
                stamps = "".join(f"{i} {int((start + offsets[j] + (i + 1) * step) * 1e6)};"
                                 for i in range(sent[j], due))
                body = BODY.format(stamps, now)
                pipe.xadd(KEY.format(j), {"e": body}, maxlen=1000, approximate=True)
                sent[j] = due
            if len(pipe):
                pipe.execute()
        print("done", flush=True)


def threaded_round(args: argparse.Namespace, client: redis.Redis, mine: list[int],
                   offsets: dict[int, float], start: float) -> None:
    """``--shape threads``: a thread per stream sleeps until each token is due and queues
    it, as a threads worker's turn waits for its model; one flusher thread writes what is
    queued every ``--flush-ms`` in one pipeline, as the product's token coalescer."""
    step = args.seconds / args.tokens
    lock = threading.Lock()
    pending: dict[int, list[str]] = {}

    def stream(j: int) -> None:
        for i in range(args.tokens):
            due = start + offsets[j] + (i + 1) * step
            time.sleep(max(0.0, due - time.time()))
            with lock:
                pending.setdefault(j, []).append(f"{i} {int(due * 1e6)};")

    threads = [threading.Thread(target=stream, args=(j,)) for j in mine]
    for t in threads:
        t.start()
    while True:
        alive = any(t.is_alive() for t in threads)
        time.sleep(args.flush_ms / 1000)
        with lock:
            batch, pending = dict(pending), {}
        if batch:
            pipe = client.pipeline(transaction=False)
            now = time.time()
            for j, stamps in batch.items():
                pipe.xadd(KEY.format(j), {"e": BODY.format("".join(stamps), now)},
                          maxlen=1000, approximate=True)
            pipe.execute()
        if not alive:
            return


# ── server (as the gateway: one reader thread) ───────────────────────────────────────

def server(args: argparse.Namespace) -> None:
    client = redis.Redis.from_url(args.redis_url)
    listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
    print(listener.getsockname()[1], flush=True)
    sockets: dict[bytes, tuple[socket.socket, WSConnection, int]] = {}
    last: dict[bytes, bytes] = {}
    lock = threading.Lock()

    def accept() -> None:
        while True:
            sock, _ = listener.accept()
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            ws = WSConnection(ConnectionType.SERVER)
            stream = -1
            while stream < 0:
                ws.receive_data(sock.recv(65536))
                for event in ws.events():
                    if isinstance(event, Request):
                        headers = dict(event.extra_headers)
                        stream = int(headers[b"authorization"].split()[1])
                        sock.sendall(ws.send(AcceptConnection()))
            key = KEY.format(stream).encode()
            with lock:
                sockets[key] = (sock, ws, stream)
                last[key] = b"0-0"  # a new stream: everything it will hold

    threading.Thread(target=accept, daemon=True).start()
    while True:
        with lock:
            streams = dict(last)
        if not streams:
            time.sleep(0.05)
            continue
        for key, entries in client.xread(streams, count=500, block=100) or []:
            sock, ws, stream = sockets[key]
            out = bytearray()
            for entry_id, fields in entries:
                out += ws.send(TextMessage(data=FRAME.format(
                    entry_id.split(b"-")[0].decode(), stream, fields[b"e"].decode()[1:])))
            sock.sendall(out)
            with lock:
                last[key] = entries[-1][0]


# ── the client and the report (this process) ─────────────────────────────────────────

def run(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(HERE))
    sys.path.insert(0, str(HERE.parent))
    from _proc import cpu_seconds, machine_busy, own_cpu, pct
    from _redis import claimed_db
    from lane_turns import WsConn

    from vancetope_brain.llm.testing import paced_tokens

    with claimed_db(args.redis_url) as url:
        rclient = redis.Redis.from_url(url)
        me = [sys.executable, __file__, "--redis-url", url, "--streams", str(args.streams),
              "--tokens", str(args.tokens), "--seconds", str(args.seconds),
              "--publishers", str(args.publishers), "--flush-ms", str(args.flush_ms),
              "--shape", args.shape]
        srv = subprocess.Popen([*me, "--role", "server"], stdout=subprocess.PIPE, text=True)
        pubs = [subprocess.Popen([*me, "--role", "publisher", "--index", str(i)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                for i in range(args.publishers)]
        try:
            assert srv.stdout is not None
            port = int(srv.stdout.readline())
            conns = [WsConn(port, str(i)) for i in range(args.streams)]
            sel = selectors.DefaultSelector()
            for i, conn in enumerate(conns):
                sel.register(conn.sock, selectors.EVENT_READ, i)
            procs = {"server": [srv.pid], **{f"publisher{i + 1}": [p.pid]
                                             for i, p in enumerate(pubs)}}
            redis_pid = int(rclient.info("server")["process_id"])
            results = []
            for name in ["warmup", *(f"round{r + 1}" for r in range(args.rounds))]:
                results.append(one_round(name, args, conns, sel, pubs, procs, redis_pid,
                                         paced_tokens, cpu_seconds, own_cpu, machine_busy))
            report(args, results[1:], pct)
        finally:
            for p in [srv, *pubs]:
                p.kill()
                p.wait()
    return 0


def one_round(name: str, args: argparse.Namespace, conns: list[Any], sel: Any,
              pubs: list[subprocess.Popen[str]], procs: dict[str, list[int]], redis_pid: int,
              paced_tokens: Any, cpu_seconds: Any, own_cpu: Any, machine_busy: Any
              ) -> dict[str, Any]:
    def cpu() -> dict[str, float]:
        snap = {k: cpu_seconds(v) for k, v in procs.items()}
        snap["redis-server"] = cpu_seconds([redis_pid])
        snap["client"] = own_cpu()
        snap["other processes"] = machine_busy() - sum(snap.values())
        return snap

    next_token = [0] * len(conns)
    delays: list[int] = []
    errors: list[str] = []
    before = cpu()
    start = time.time() + 0.2
    for p in pubs:
        assert p.stdin is not None
        p.stdin.write(f"go {start}\n")
        p.stdin.flush()
    total = args.tokens * len(conns)
    deadline = time.monotonic() + args.seconds * 5 + 30
    end = start
    while len(delays) < total and time.monotonic() < deadline:
        for key, _ in sel.select(0.2):
            conn = conns[key.data]
            conn.feed()
            now_us = time.time_ns() // 1000
            for raw in conn.pending:
                event = json.loads(raw)["data"]
                for index, emitted_us in paced_tokens(event["data"]["text"]):
                    if index != next_token[key.data] and len(errors) < 20:
                        errors.append(f"stream {key.data}: token {index} where "
                                      f"{next_token[key.data]} was due")
                    next_token[key.data] = index + 1
                    delays.append(now_us - emitted_us)
            conn.pending.clear()
            end = time.time()
    for p in pubs:
        assert p.stdout is not None
        p.stdout.readline()  # "done"
    after = cpu()
    wall = time.time() - start
    used = {k: after[k] - before[k] for k in after}
    print(f"{name}: {len(delays)}/{total} tokens, {len(errors)} out of order", flush=True)
    return {"name": name, "tokens": len(delays), "seconds": end - start, "delays": delays,
            "cpu": used, "wall": wall, "errors": errors}


def report(args: argparse.Namespace, rounds: list[dict[str, Any]], pct: Any) -> None:
    tokens = sum(r["tokens"] for r in rounds)
    delays = [d for r in rounds for d in r["delays"]]
    seconds = sum(r["seconds"] for r in rounds)
    wall = sum(r["wall"] for r in rounds)
    cpu: dict[str, float] = {}
    for r in rounds:
        for k, v in r["cpu"].items():
            cpu[k] = cpu.get(k, 0.0) + v
    ours = {k: v for k, v in cpu.items() if k != "other processes"}
    print(f"\nfloor: {args.streams} streams × {args.tokens} tokens over {args.seconds:g} s, "
          f"{args.publishers} publisher process(es) ({args.shape}), flush {args.flush_ms:g} ms, "
          f"{len(rounds)} round(s), {os.cpu_count()} CPUs")
    print(f"tokens/s {tokens / seconds:,.0f}; delay p50 {pct(delays, 50) / 1000:.1f} ms, "
          f"p90 {pct(delays, 90) / 1000:.1f} ms, p99 {pct(delays, 99) / 1000:.1f} ms, "
          f"max {max(delays) / 1000:.1f} ms; errors "
          f"{sum(len(r['errors']) for r in rounds)}")
    print("CPU µs per token: " + ", ".join(f"{k} {v / tokens * 1e6:.1f}" for k, v in cpu.items())
          + f", total (without other processes) {sum(ours.values()) / tokens * 1e6:.1f}")
    print("cores busy: " + ", ".join(f"{k} {v / wall:.2f}" for k, v in cpu.items()))
    for r in rounds:
        for e in r["errors"][:5]:
            print("  " + e)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--streams", type=int, default=500)
    p.add_argument("--tokens", type=int, default=100, help="tokens per stream per round")
    p.add_argument("--seconds", type=float, default=2.0, help="seconds a round streams")
    p.add_argument("--rounds", type=int, default=2, help="rounds measured (after a warm-up)")
    p.add_argument("--publishers", type=int, default=2, help="publisher OS processes")
    p.add_argument("--flush-ms", type=float, default=5.0,
                   help="how often a publisher writes what came due (the product's default)")
    p.add_argument("--shape", choices=["loop", "threads"], default="loop",
                   help="a publisher is one loop over its streams, or a thread per stream "
                        "that sleeps until each token is due (a threads worker's turns) "
                        "and a flusher thread")
    p.add_argument("--redis-url", help="pin the Redis database (default: claim a free one)")
    p.add_argument("--role", choices=["client", "server", "publisher"], default="client",
                   help=argparse.SUPPRESS)
    p.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.role == "publisher":
        publisher(args)
    elif args.role == "server":
        server(args)
    else:
        return run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
