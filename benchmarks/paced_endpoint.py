"""A paced OpenAI-compatible streaming endpoint for ``llm_load.py --model endpoint``.

    python benchmarks/paced_endpoint.py --tokens 100 --seconds 2 --port-file PATH

Every ``POST …/chat/completions`` (``stream: true``) is answered with an SSE stream of
``--tokens`` content deltas over ``--seconds``, as ``PacedModel`` paces them: token ``i`` is
due at ``start + (i + 1) · seconds / tokens``, and its text is ``"<i> <µs>;"`` — its index
and the time it is written to the socket (``time.time_ns() // 1000``), which
``paced_tokens`` parses, so the client measures the delay from the endpoint's write through
the worker's model client to the WebSocket. Then a ``finish_reason: stop`` chunk, a usage
chunk when the request asks for one, and ``[DONE]``. HTTP/1.1 with chunked bodies and
keep-alive, so a client that keeps its connections (the worker's model loop) reuses them.

One asyncio loop writes every stream: one timer wakes when the earliest token is due and
writes all tokens due by then, so the endpoint's own CPU per token stays small (a real
model server is elsewhere; ``llm_load.py`` reports this process apart and leaves it out of
the total). Binds 127.0.0.1 on an ephemeral port and writes it to ``--port-file``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import heapq
import json
import time
from pathlib import Path

CHUNK = ('{"id":"paced","object":"chat.completion.chunk","created":0,"model":"paced",'
         '"choices":[{"index":0,"delta":{"content":"%s"},"finish_reason":null}]}')
STOP = ('{"id":"paced","object":"chat.completion.chunk","created":0,"model":"paced",'
        '"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}')
USAGE = ('{"id":"paced","object":"chat.completion.chunk","created":0,"model":"paced",'
         '"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":%d,"total_tokens":%d}}')


def _chunked(data: str) -> bytes:
    body = f"data: {data}\n\n".encode()
    return b"%x\r\n%s\r\n" % (len(body), body)


class _Stream:
    def __init__(self, writer: asyncio.StreamWriter, start: float, usage: bool) -> None:
        self.writer = writer
        self.start = start
        self.usage = usage
        self.next = 0
        self.done = asyncio.get_running_loop().create_future()


class Endpoint:
    def __init__(self, tokens: int, seconds: float) -> None:
        self.tokens = tokens
        self.step = seconds / tokens
        self.due: list[tuple[float, int, _Stream]] = []  # (time, tie-break, stream)
        self.count = 0
        self.wake = asyncio.Event()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                length = 0
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                body = json.loads(await reader.readexactly(length)) if length else {}
                usage = bool((body.get("stream_options") or {}).get("include_usage"))
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                             b"transfer-encoding: chunked\r\nconnection: keep-alive\r\n\r\n")
                stream = _Stream(writer, time.monotonic(), usage)
                self._schedule(stream)
                await stream.done
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def _schedule(self, stream: _Stream) -> None:
        self.count += 1
        heapq.heappush(self.due, (stream.start + (stream.next + 1) * self.step, self.count,
                                  stream))
        self.wake.set()

    async def tick(self) -> None:
        while True:
            if not self.due:
                self.wake.clear()
                await self.wake.wait()
                continue
            delay = self.due[0][0] - time.monotonic()
            if delay > 0:
                self.wake.clear()
                with contextlib.suppress(TimeoutError):  # a new stream may be due sooner
                    await asyncio.wait_for(self.wake.wait(), delay)
                continue
            now = time.monotonic()
            while self.due and self.due[0][0] <= now:
                _, _, stream = heapq.heappop(self.due)
                self._write(stream)
            await asyncio.sleep(0)

    def _write(self, stream: _Stream) -> None:
        if stream.writer.is_closing():
            stream.done.set_result(None)
            return
        i = stream.next
        stream.writer.write(_chunked(CHUNK % f"{i} {time.time_ns() // 1000};"))
        stream.next += 1
        if stream.next < self.tokens:
            self._schedule(stream)
            return
        tail = _chunked(STOP)
        if stream.usage:
            tail += _chunked(USAGE % (self.tokens, self.tokens + 1))
        stream.writer.write(tail + _chunked("[DONE]") + b"0\r\n\r\n")
        stream.done.set_result(None)


async def main(args: argparse.Namespace) -> None:
    endpoint = Endpoint(args.tokens, args.seconds)
    server = await asyncio.start_server(endpoint.serve, "127.0.0.1", 0, backlog=2048)
    port = server.sockets[0].getsockname()[1]
    Path(args.port_file).write_text(str(port))
    async with server:
        await endpoint.tick()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=100)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--port-file", required=True)
    asyncio.run(main(p.parse_args()))
