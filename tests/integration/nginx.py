"""Debian's nginx (``apt-get install nginx``; ``.ci/run`` installs it) running
``deploy/nginx/vancetope.conf`` unprivileged on a free port in front of test gateways:
only the upstream addresses and the port are replaced, and a main configuration of the
test's own gives it a temporary prefix, logs and an access log that records which
gateway served each request (``$upstream_addr``)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.helpers import wait_for
from tests.integration.conftest import REPO, tail
from tests.integration.test_plain_install import free_port

CONF = REPO / "deploy" / "nginx" / "vancetope.conf"

MAIN = """
worker_processes 1;
{user}
pid {prefix}/nginx.pid;
error_log {prefix}/error.log notice;
events {{ worker_connections 256; }}
worker_shutdown_timeout 5s;
http {{
    log_format upstreams '$request_uri $status $upstream_addr';
    access_log {prefix}/access.log upstreams;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    include {prefix}/vancetope.conf;
}}
"""


def nginx_binary() -> str:
    found = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx",) if os.path.exists(p)), None)
    if found is None:
        message = "nginx is not installed: apt-get install nginx (.ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def routing(upstreams: list[int], port: int) -> str:
    """``deploy/nginx/vancetope.conf`` with these upstream ports on loopback and this port."""
    text = CONF.read_text()
    servers = re.findall(r"^\s*server web\d+:8000 .*;$", text, flags=re.M)
    assert len(servers) == 2, "deploy/nginx/vancetope.conf: expected upstreams web1 and web2"
    options = servers[0].split(":8000", 1)[1]
    text = text.replace(servers[0], "\n".join(f"    server 127.0.0.1:{p}{options}"
                                              for p in upstreams)).replace(servers[1] + "\n", "")
    assert "    listen 80;" in text
    return text.replace("    listen 80;", f"    listen 127.0.0.1:{port};")


class Nginx:
    def __init__(self, upstreams: list[int]) -> None:
        binary = nginx_binary()
        # Not under pytest's tmp (mode 0700): nginx's worker runs as nobody when we are root.
        self.prefix = Path(tempfile.mkdtemp(prefix="vt-nginx-"))
        self.prefix.chmod(0o755)
        self.port = free_port()
        (self.prefix / "vancetope.conf").write_text(routing(upstreams, self.port))
        user = "user nobody nogroup;" if os.geteuid() == 0 else ""
        (self.prefix / "nginx.conf").write_text(MAIN.format(prefix=self.prefix, user=user))
        check = subprocess.run([binary, "-t", "-p", str(self.prefix), "-c",
                                str(self.prefix / "nginx.conf")], capture_output=True, text=True)
        if check.returncode != 0:
            self.remove()
            raise AssertionError(f"nginx refused the configuration:\n{check.stderr}")
        self.popen = subprocess.Popen(
            [binary, "-p", str(self.prefix), "-c", str(self.prefix / "nginx.conf"),
             "-g", "daemon off;"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
            start_new_session=True)
        wait_for(self._listening, timeout=30, interval=0.05, what="nginx to listen")

    def _listening(self) -> bool:
        if self.popen.poll() is not None:
            raise AssertionError(f"nginx exited:\n{tail(self.prefix / 'error.log')}")
        import socket

        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def url(self, tag: str) -> str:
        """The WebSocket URL through nginx; ``tag`` marks the connection in the access log."""
        return f"ws://127.0.0.1:{self.port}/ws?client={tag}"

    def upstreams(self) -> dict[str, list[int]]:
        """tag → the gateway port of each finished /ws request with that tag, in order."""
        found: dict[str, list[int]] = {}
        for line in (self.prefix / "access.log").read_text().splitlines():
            match = re.match(r"/ws\?client=(\S+) \d+ 127\.0\.0\.1:(\d+)$", line)
            if match:
                found.setdefault(match.group(1), []).append(int(match.group(2)))
        return found

    def stop(self) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGQUIT)  # graceful: finish, then write logs
            try:
                self.popen.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout=15)
        print(f"--- nginx error log:\n{tail(self.prefix / 'error.log')}")

    def remove(self) -> None:
        shutil.rmtree(self.prefix, ignore_errors=True)
