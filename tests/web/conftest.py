"""Browser tests: Debian's headless Chromium (``/usr/bin/chromium``, never a downloaded
browser) through Playwright, against a real ``vancetope serve`` subprocess — free port,
temporary data directory, the offline demo model.

Fixtures: ``server`` (one per run: ``url``, ``token``, ``data_dir``, ``sign_in_url``),
``page`` (a fresh browser context per test; a script error on the page fails the test) and
``axe_violations(page)`` (an automated accessibility check with axe-core) and
``shoot(page, name)``, which keeps a screenshot in the artefact directory
(``VANCETOPE_TEST_ARTIFACTS``, else ``web-artifacts`` under pytest's temporary base),
printed at the end of the run.

Without Chromium the tests are skipped — except in CI (``CI`` set; ``.ci/run`` sets it and
installs Chromium), where they fail.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import run_report

CHROMIUM = "/usr/bin/chromium"
STARTUP_SECONDS = 60  # as the multi-process tests wait for a gunicorn (a loaded machine: imports)


@dataclass
class Served:
    url: str
    data_dir: Path
    token: str
    output: list[str]

    @property
    def sign_in_url(self) -> str:
        return f"{self.url}/#token={self.token}"

    def admin(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``vancetope admin ARGS`` on this server's data directory."""
        return subprocess.run([sys.executable, "-m", "vancetope_gateway.cli", "admin", *args],
                              env=dict(os.environ, VANCETOPE_DATA_DIR=str(self.data_dir)),
                              capture_output=True, text=True, timeout=30, check=True)


def _chromium() -> str:
    found = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail(f"{CHROMIUM} is missing in CI: .ci/run installs Debian's chromium")
    pytest.skip(f"{CHROMIUM} is missing (apt-get install -y chromium chromium-driver)")


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``vancetope serve`` in a subprocess on a free port, with the demo model."""
    _chromium()  # skip before starting a server no browser will use
    with serve(tmp_path_factory.mktemp("web-data")) as served:
        yield served


@contextlib.contextmanager
def serve(data_dir: Path, **more: str) -> Iterator[Served]:
    """``vancetope serve`` in a subprocess on a free port (the demo model unless ``more``
    names an endpoint, ``OPENAI_BASE_URL``), until the block ends."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VANCETOPE_", "OPENAI_"))}
    env.update(VANCETOPE_DATA_DIR=str(data_dir), VANCETOPE_PORT="0",
               VANCETOPE_HOST="127.0.0.1", VANCETOPE_TOKEN_RECHECK="0.5",
               # Small enough that a tab away for three replies misses events (events-gap).
               VANCETOPE_EVENT_LOG_MAX="200",
               # The demo model's pause between streamed words (issue 13's demo work): short,
               # so replies still arrive token by token and the tests stay fast.
               VANCETOPE_DEMO_TOKEN_DELAY="0.003", **more)
    proc = subprocess.Popen([sys.executable, "-m", "vancetope_gateway.cli", "serve"], env=env,
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    output: list[str] = []
    port: list[str] = []
    ready = threading.Event()

    def drain() -> None:  # read all output, so the server never blocks on a full pipe
        for line in proc.stdout:  # type: ignore[union-attr]
            output.append(line)
            found = re.search(r"http://127\.0\.0\.1:(\d+)", line)
            if found and not port:
                port.append(found.group(1))
                ready.set()
        ready.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        assert ready.wait(STARTUP_SECONDS) and port, "".join(output)
        url = f"http://127.0.0.1:{port[0]}"
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            try:
                urllib.request.urlopen(url + "/healthz", timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "".join(output)
                time.sleep(0.1)
        yield Served(url, data_dir, (data_dir / "token").read_text().strip(), output)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        reader.join(timeout=5)
        proc.stdout.close()


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    executable = _chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
        launched = playwright.chromium.launch(executable_path=executable,
                                              args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser) -> Iterator[object]:  # type: ignore[no-untyped-def]
    # Reduced motion: no toast is caught mid-animation (axe would misjudge its contrast).
    context = browser.new_context(viewport={"width": 1400, "height": 900},
                                  reduced_motion="reduce")
    context.set_default_timeout(15_000)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda e: errors.append(f"{e}\n{e.stack}"))
    yield opened
    context.close()
    assert not errors, "script errors on the page:\n" + "\n".join(errors)


@pytest.fixture
def axe_violations():  # type: ignore[no-untyped-def]
    """``axe_violations(page)``: axe-core's WCAG findings on the page now, one line each."""
    from axe_playwright_python.sync_playwright import Axe

    def check(target) -> list[str]:  # type: ignore[no-untyped-def]
        found = Axe().run(target).response["violations"]
        return [f"{v['id']} ({v['impact']}): {v['help']} — "
                + "; ".join(f"{n['target'][0]} {n['html'][:120]} {n.get('failureSummary', '')}"
                            for n in v["nodes"][:5]) for v in found]
    return check


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get("VANCETOPE_TEST_ARTIFACTS")
    folder = Path(chosen) if chosen else tmp_path_factory.getbasetemp() / "web-artifacts"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def shoot(artifacts: Path):  # type: ignore[no-untyped-def]
    """``shoot(page_or_locator, name)``: keep a PNG screenshot as a test artefact."""
    def take(target, name: str) -> Path:  # type: ignore[no-untyped-def]
        path = artifacts / f"{name}.png"
        target.screenshot(path=str(path))
        run_report.add("browser test screenshots", str(path))
        return path
    return take
