"""What RAG autoInject adds to an Arthur turn: the same turns with ``rag.autoInject.enabled``
on and off, alternating (issue 29; arthur-engine §3.8 item 4).

    python benchmarks/auto_inject.py [--chunks 20000] [--turns 100]

A focused in-process harness, not ``lane_turns.py``: the test suite's embedded runtime
(``tests/conftest.py``'s ``Embedded``: the gateway's parts and a real in-process Celery
worker, memory broker, fakeredis, SQLite) — the whole turn path of ``vancetope serve`` in one
process — with a zero-latency model that answers ``respond("ok")``. The project holds
``--chunks`` chunks in 20 documents of Zipf text (``retrieval.py``'s generator; another
tenant holds as many); each user message is a question naming one mid-frequency and one rare
word of them, so autoInject finds passages and puts a ``<rag-context>`` block of
``rag.topK`` (5) hits into the system prompt. No embedding endpoint: lexical only.

Printed, on and off: the turn (steer → Arthur's reply in the chat, polled every 0.2 ms)
p50 / p95, and the time inside Arthur's call of ``auto_inject`` (timed by wrapping the name
in ``engines/arthur.py``; off, it only reads the setting). The added time is the difference
of the p50s. Not measured: an embedding call (none), the model reading a longer prompt.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _proc import pct  # noqa: E402
from retrieval import Zipf, add_document  # noqa: E402

from tests.conftest import Embedded  # noqa: E402
from tests.engines.test_arthur import arthur_session, respond  # noqa: E402
from vancetope_brain.engines import arthur  # noqa: E402
from vancetope_brain.llm.testing import FunctionModel  # noqa: E402
from vancetope_brain.models import ChatRole  # noqa: E402
from vancetope_brain.models.settings import SettingScope  # noqa: E402
from vancetope_brain.store import DocumentStore, LaneStore  # noqa: E402

TENANT, PROJECT = "acme", "default"


def timed(record: list[float], call: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            record.append(1000 * (time.perf_counter() - start))
    return wrapper


def run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    emb = Embedded(tmp)
    try:
        return _measure(emb, args)
    finally:
        emb.stop()


def _measure(emb: Embedded, args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    zipf = Zipf(50_000, rng)
    documents = emb.brain.store.port(DocumentStore)
    per_doc = max(1, args.chunks // 20)
    for n in range(20):
        add_document(documents, f"doc{n:02}.md", [zipf.text(180) for _ in range(per_doc)],
                     tenant=TENANT, project=PROJECT)
        add_document(documents, f"other{n:02}.md", [zipf.text(180) for _ in range(per_doc)],
                     tenant="evil", project=PROJECT)
    emb.model = FunctionModel(lambda messages, tools: respond("ok"))
    lanes = emb.brain.store.port(LaneStore)
    inject: list[float] = []
    original = arthur.auto_inject
    arthur.auto_inject = timed(inject, original)  # type: ignore[assignment]
    walls: dict[bool, list[float]] = {True: [], False: []}
    injects: dict[bool, list[float]] = {True: [], False: []}
    session = None
    try:
        for turn in range(-4, 2 * args.turns):  # four warm-up turns
            on = turn % 2 == 0
            emb.brain.settings.set(TENANT, SettingScope.project(PROJECT),
                                   "rag.autoInject.enabled", on)
            if session is None or turn % 20 == 0:
                session = arthur_session(emb)
            process = session.chat_process_id
            before = len(lanes.chat_history(TENANT, process))
            question = (f"What do my documents say about {rng.choice(zipf.between(300, 3000))}"
                        f" and {rng.choice(zipf.between(None, None))}?")
            start = time.perf_counter()
            emb.brain.sessions.steer(emb.who, process, question)
            while True:
                chat = lanes.chat_history(TENANT, process)
                if len(chat) >= before + 2 and chat[-1].role is ChatRole.ASSISTANT:
                    break
                time.sleep(0.0002)
            wall = 1000 * (time.perf_counter() - start)
            if turn >= 0:
                walls[on].append(wall)
                injects[on].append(inject[-1])
    finally:
        arthur.auto_inject = original  # type: ignore[assignment]
    return {mode: {"turns": len(walls[on]), "turn_p50_ms": pct(walls[on], 50),
                   "turn_p95_ms": pct(walls[on], 95),
                   "auto_inject_p50_ms": pct(injects[on], 50),
                   "auto_inject_p95_ms": pct(injects[on], 95),
                   "auto_inject_mean_ms": statistics.mean(injects[on])}
            for mode, on in (("on", True), ("off", False))} | {"chunks": args.chunks}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--turns", type=int, default=100, help="turns with it on (and off)")
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vancetope-autoinject-") as tmp:
        result = run(args, Path(tmp))
    if args.json:
        print(json.dumps(result, indent=2))
        return result
    print(f"project of {result['chunks']:,} chunks (+ as many of another tenant), "
          f"{result['on']['turns']} turns each way, alternating")
    for mode in ("on", "off"):
        r = result[mode]
        print(f"autoInject {mode:3}: turn p50 {r['turn_p50_ms']:.2f} / p95 "
              f"{r['turn_p95_ms']:.2f} ms; auto_inject p50 {r['auto_inject_p50_ms']:.3f} / p95 "
              f"{r['auto_inject_p95_ms']:.3f} ms")
    print(f"added p50: turn {result['on']['turn_p50_ms'] - result['off']['turn_p50_ms']:.2f} ms,"
          f" auto_inject {result['on']['auto_inject_p50_ms'] - result['off']['auto_inject_p50_ms']:.2f} ms")
    return result


if __name__ == "__main__":
    main()
