"""The model call alone: CPU per token of concurrent ``OpenAiChatModel`` streams in one process.

    python benchmarks/model_stream.py --streams 100 [--shape loop|thread|sdk]
                                      [--transport httpx] [--source DIR]

Starts ``paced_endpoint.py`` (``--tokens`` tokens over ``--seconds`` per stream), then runs
``--streams`` calls at once, each from a thread of its own as a threads worker's turns make
them, with an ``on_token`` that only counts: a warm-up batch, then ``--batches`` measured
ones. Prints this process's CPU µs per token (``time.process_time``: every thread, the
model loop's included) and each batch's wall time (the stream takes ``--seconds``; more
means this process fell behind). ``--shape thread`` makes each call read its own stream on
its calling thread with a client of its own (what a gevent process does, and what every
call did before the model loop); ``--transport httpx`` gives the loop's clients the SDK's
default httpx transport instead of its aiohttp one (what an install without aiohttp, or a
checkout from before it, uses); ``--source DIR`` imports the product from another
checkout (one without ``llm/aio.py`` streams on the calling thread whatever the shape).
``--shape sdk`` runs no Vancetope code at all: the ``openai`` client as its README streams,
``AsyncOpenAI`` (its aiohttp transport unless ``--transport httpx``) and ``async for chunk in
stream`` on one asyncio loop, every stream at once: the floor of reading a model's stream
with the client the design names (issue 31, target 1).
The endpoint's CPU is its own process's, not counted.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--streams", type=int, default=100)
    p.add_argument("--tokens", type=int, default=100)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--batches", type=int, default=3)
    p.add_argument("--shape", choices=("loop", "thread", "sdk"), default="loop")
    p.add_argument("--transport", choices=("product", "httpx"), default="product",
                   help="the loop clients' HTTP transport: the product's choice (aiohttp "
                        "where installed) or the SDK's default httpx one")
    p.add_argument("--source", help="import the product from this checkout")
    args = p.parse_args()
    sys.path.insert(0, args.source or str(HERE.parent))
    from vancetope_brain.llm import openai_provider
    from vancetope_brain.llm.base import LlmMessage
    from vancetope_brain.llm.openai_provider import OpenAiChatModel
    if args.transport == "httpx":
        openai_provider._aiohttp_client = lambda: None  # type: ignore[attr-defined]
    if args.shape == "thread":
        try:
            from vancetope_brain.llm import aio
        except ImportError:  # a checkout from before the model loop
            pass
        else:
            aio.available = lambda: False  # type: ignore[method-assign]

    with tempfile.TemporaryDirectory() as tmp:
        port_file = Path(tmp) / "port"
        endpoint = subprocess.Popen([sys.executable, str(HERE / "paced_endpoint.py"),
                                     "--tokens", str(args.tokens), "--seconds",
                                     str(args.seconds), "--port-file", str(port_file)])
        try:
            while not port_file.exists() or not port_file.read_text():
                if endpoint.poll() is not None:
                    raise SystemExit("the paced endpoint exited")
                time.sleep(0.05)
            base_url = f"http://127.0.0.1:{port_file.read_text()}/v1"
            model = OpenAiChatModel("paced", base_url=base_url)
            tokens = [0]

            def on_token(text: str) -> None:
                tokens[0] += 1

            def call() -> None:
                model.complete([LlmMessage("user", "hi")], on_token=on_token)

            def batch() -> None:
                threads = [threading.Thread(target=call) for _ in range(args.streams)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()

            sdk = (_SdkBatch(base_url, args.streams, args.transport, tokens)
                   if args.shape == "sdk" else None)
            run_batch = sdk or batch

            run_batch()  # warm-up: connections, imports
            cpu, wall = [], []
            for _ in range(args.batches):
                tokens[0] = 0
                c0, w0 = time.process_time(), time.monotonic()
                run_batch()
                cpu.append((time.process_time() - c0) * 1e6 / tokens[0])
                wall.append(time.monotonic() - w0)
            if sdk is not None:
                sdk.close()
        finally:
            endpoint.terminate()
            endpoint.wait(5)
    print(f"{args.shape} {args.transport} {args.streams} streams "
          f"({args.source or 'this checkout'}): CPU µs "
          f"per token best {min(cpu):.1f}, all {', '.join(f'{c:.1f}' for c in cpu)}; "
          f"batch wall s {', '.join(f'{w:.2f}' for w in wall)}")
    return 0


class _SdkBatch:
    """A batch of ``streams`` concurrent streaming completions read by the ``openai`` client
    alone, on one asyncio loop that lives as long as the run (the client's connections kept
    between batches, as a worker keeps its own)."""

    def __init__(self, base_url: str, streams: int, transport: str, tokens: list[int]) -> None:
        import asyncio

        import openai
        self._loop = asyncio.new_event_loop()
        self._client = openai.AsyncOpenAI(
            base_url=base_url, api_key="bench",
            http_client=openai.DefaultAioHttpClient() if transport == "product" else None)
        self._streams, self._tokens = streams, tokens

    async def _one(self) -> None:
        stream = await self._client.chat.completions.create(
            model="paced", messages=[{"role": "user", "content": "hi"}], stream=True)
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                self._tokens[0] += 1

    def __call__(self) -> None:
        import asyncio

        async def run() -> None:
            await asyncio.gather(*(self._one() for _ in range(self._streams)))
        self._loop.run_until_complete(run())

    def close(self) -> None:
        self._loop.run_until_complete(self._client.close())
        self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        self._loop.close()


if __name__ == "__main__":
    sys.exit(main())
