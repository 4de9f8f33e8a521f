"""``benchmarks/retrieval.py`` at a small size, so the script keeps running against the code
it measures (its figures are not checked: a benchmark never asserts wall-clock times)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "retrieval.py"


def _script():
    spec = importlib.util.spec_from_file_location("bench_retrieval", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


SMALL = ["--chunks", "400", "--other-chunks", "200", "--documents", "4", "--queries", "5",
         "--vocabulary", "4000", "--json"]


def test_the_retrieval_benchmark_runs_every_query_class(capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    result = _script().main([*SMALL, "--mode", "lexical"])
    [rows] = result["modes"].values()
    assert [row["class"] for row in rows] == ["rare", "mid", "common", "question"]
    assert all(row["queries"] == 5 and math.isfinite(row["p99_ms"]) for row in rows)
    by_class = {row["class"]: row for row in rows}
    # every chunk holds some of the thirty commonest words: each search finds its 5
    assert by_class["common"]["hits"] == 25 and by_class["common"]["chunks_holding_median"] > 0
    assert '"modes"' in capsys.readouterr().out


def test_the_vector_and_hybrid_modes_search_the_seeded_vectors(tmp_path: Path) -> None:
    result = _script().main([*SMALL, "--dim", "8", "--store", str(tmp_path / "s.db")])
    assert list(result["modes"]) == ["lexical", "vector", "hybrid"]
    [scan] = result["modes"]["vector"]
    assert scan["queries"] == 5 and scan["hits"] == 5 * 20  # every chunk has a vector
    hybrid = {row["class"]: row for row in result["modes"]["hybrid"]}
    assert list(hybrid) == ["rare", "mid", "common", "question"]
    assert all(row["hits"] == 25 for row in hybrid.values())  # the vector path fills top 5
