"""``.ci/run`` installs as a newcomer does (issue 27): a fresh virtual environment outside
the checkout, the README's own test commands run inside it, and the versions it tested
printed. Without this, CI passed on whatever an earlier run had left installed while a
newcomer's fresh ``pip install`` resolved a pytest that broke every test."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CI_RUN = ROOT / ".ci" / "run"


def _readme_test_commands() -> list[str]:
    section = ROOT.joinpath("README.md").read_text().split("\n## Tests\n", 1)[1]
    block = re.search(r"```bash\n(.*?)\n```", section, re.DOTALL)
    assert block, "the README's Tests section opens with its command"
    return [c.strip() for c in block.group(1).split("&&")]


def test_ci_runs_the_readmes_test_commands_in_a_fresh_venv_outside_the_checkout():
    lines = [line.strip() for line in CI_RUN.read_text().splitlines()]
    install, test = _readme_test_commands()
    assert install == "pip install -e '.[dev]'" and test == "python -m pytest"
    venv = next((i for i, line in enumerate(lines) if line.startswith("python3 -m venv ")), None)
    assert venv is not None, ".ci/run makes a virtual environment"
    assert '"$VENV"' in lines[venv] and 'mktemp -d "${TMPDIR:-/tmp}/' in \
        CI_RUN.read_text()  # outside the checkout, new every run
    activate = lines.index('source "$VENV/bin/activate"')
    assert venv < activate < lines.index(install) < lines.index(test)
    # Nothing else installs Python packages, or runs them from outside that environment.
    commands = [line for line in lines if not line.startswith(("#", "echo "))]
    assert [line for line in commands if re.search(r"pip install|python3 -m (pip|pytest|ruff|"
                                                   r"mypy)", line)] == [install]


def test_ci_prints_the_versions_it_tested_with():
    script = CI_RUN.read_text()
    printed = re.search(r'for name in \(([^)]*)\):', script)
    assert printed, "the tested versions are printed"
    assert {n.strip(' "') for n in printed.group(1).split(",")} >= {
        "pytest", "celery", "kombu", "redis", "flask-sock", "pydantic", "openai"}
