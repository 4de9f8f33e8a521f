"""``deploy/`` is checked, not just written: the compose file's services run the
Procfile's entries, whose modules exist; its environment names only real variables; nginx,
health checks and volumes point at what exists; and ``docker-compose config`` (Compose v1,
Debian's package: ``.ci/run`` installs it; it works offline) accepts the file.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from vancetope_brain.config import VARIABLES

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"
APP_SERVICES = {"web1", "web2", "worker", "beat", "flower"}


def procfile() -> dict[str, str]:
    entries = {}
    for line in (ROOT / "Procfile").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, command = line.split(":", 1)
            entries[name.strip()] = command.strip()
    return entries


def as_pid_1(entry: str) -> str:
    """A Procfile entry as a container runs it: ``exec``-ed, so that the process itself is
    PID 1 and gets the platform's SIGTERM (a shell as PID 1 would not pass it on)."""
    return entry if " exec " in entry else f"exec {entry}"


def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def defines(module: str, name: str) -> bool:
    """``module`` is importable (found, not imported: importing builds an app) and assigns
    or defines ``name`` at its top level."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, f"no module {module}"
    tree = ast.parse(Path(spec.origin).read_text())
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
    return False


def test_every_procfile_entry_names_modules_that_exist():
    entries = procfile()
    assert set(entries) == {"web", "worker", "beat", "flower"}
    for command in entries.values():
        for app in re.findall(r"celery -A (\S+)", command):
            assert defines(app, "app"), app
        for cls in re.findall(r"--worker-class (\S+)", command):
            module, name = cls.rsplit(".", 1)
            assert defines(module, name), cls
        for module, name in re.findall(r"'([\w.]+):(\w+)'", command):
            assert defines(module, name), f"{module}:{name}"


def test_compose_services_run_the_procfile_entries():
    services = compose()["services"]
    assert set(services) == {"redis", "mongo", "nginx"} | APP_SERVICES
    entries = procfile()
    ran = set()
    for name in APP_SERVICES:
        entry = services[name]["labels"]["vancetope.procfile"]
        shell, flag, command = services[name]["command"]
        # $$ keeps compose from substituting what the shell is to expand
        assert (shell, flag, command.replace("$$", "$")) == ("sh", "-c", as_pid_1(entries[entry]))
        ran.add(entry)
    assert ran == set(entries)
    assert services["beat"].get("deploy", {}).get("replicas", 1) == 1  # exactly one beat
    assert services["worker"]["deploy"]["replicas"] >= 2


def test_compose_environment_is_the_one_deployment():
    services = compose()["services"]
    envs = {name: services[name]["environment"] for name in APP_SERVICES}
    for name, env in envs.items():
        unknown = [k for k in env if k.startswith("VANCETOPE_") and k not in VARIABLES]
        assert unknown == [], f"{name}: {unknown} are not in config.VARIABLES"
        assert env["VANCETOPE_REDIS_URL"] == "redis://redis:6379/0"
        assert env["VANCETOPE_STORE_URL"].startswith("mongodb://mongo:27017/")
        assert "${VANCETOPE_SECRET_KEY:?" in env["VANCETOPE_SECRET_KEY"]  # required, shared
        assert "data:/data" in services[name]["volumes"]  # attachments shared by all
    assert "${FLOWER_BASIC_AUTH:?" in envs["flower"]["FLOWER_BASIC_AUTH"]
    for name in ("worker", "beat"):  # the liveness probe reads the file the process touches
        probe = services[name]["healthcheck"]["test"]
        assert probe[:3] == ["CMD", "vancetope", "health"]
        assert probe[3] == envs[name]["VANCETOPE_HEALTH_FILE"]
    for name in ("web1", "web2"):
        assert envs[name]["PORT"] == "8000"
        assert "/readyz" in " ".join(services[name]["healthcheck"]["test"])


def test_compose_nginx_routes_to_both_gateways_with_the_deployed_configuration():
    nginx = compose()["services"]["nginx"]
    source, target = nginx["volumes"][0].split(":")[:2]
    assert (DEPLOY / source).resolve() == DEPLOY / "nginx" / "vancetope.conf"
    assert target == "/etc/nginx/conf.d/default.conf"
    conf = (DEPLOY / "nginx" / "vancetope.conf").read_text()
    assert re.findall(r"server (web\d):8000", conf) == ["web1", "web2"]
    assert set(nginx["depends_on"]) == {"web1", "web2"}
    assert "proxy_set_header Upgrade $http_upgrade;" in conf
    assert "ip_hash" not in conf and "sticky" not in conf.replace("sticky-free", "")
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert compose()["x-app"]["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert "pip install --no-cache-dir /src" in dockerfile  # a plain install, no extra


def _compose_cli() -> list[str]:
    found = shutil.which("docker-compose")
    if found is None:
        message = "docker-compose is not installed: apt-get install docker-compose (.ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return [found, "-f", str(COMPOSE), "config"]


def test_docker_compose_config_accepts_the_file_and_refuses_missing_secrets():
    cli = _compose_cli()
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("VANCETOPE_", "FLOWER_", "OPENAI_"))}
    ok = subprocess.run(cli + ["-q"], env={**base, "VANCETOPE_SECRET_KEY": "k" * 32,
                                           "FLOWER_BASIC_AUTH": "ops:secret"},
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    refused = subprocess.run(cli + ["-q"], env={**base, "VANCETOPE_SECRET_KEY": "k" * 32},
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "FLOWER_BASIC_AUTH" in refused.stderr


K8S = DEPLOY / "k8s"


def manifests() -> list[dict]:
    return [doc for path in sorted(K8S.glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text()) if doc]


def test_kubernetes_manifests_pass_the_schema_check():
    import kubernetes_validate  # JSON schemas of every Kubernetes version, shipped in the wheel

    version = kubernetes_validate.latest_version()
    docs = manifests()
    assert {d["kind"] for d in docs} >= {"Deployment", "Service", "Ingress", "ConfigMap",
                                         "PersistentVolumeClaim"}
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            raise AssertionError(f"{doc['kind']} {doc['metadata']['name']}: {e.message} "
                                 f"at {'.'.join(map(str, e.path))}") from None
    with pytest.raises(kubernetes_validate.ValidationError):  # the check does check
        kubernetes_validate.validate({**docs[0], "spec": {"replicas": "two"}}, version, True)


def _containers() -> dict[str, dict]:
    return {d["metadata"]["labels"]["app.kubernetes.io/component"]:
            d["spec"]["template"]["spec"]["containers"][0]
            for d in manifests() if d["kind"] == "Deployment"}


def test_kubernetes_deployments_run_the_procfile_with_probes_wired():
    containers, entries = _containers(), procfile()
    for entry, command in entries.items():
        assert containers[entry]["command"] == ["sh", "-c", as_pid_1(command)], entry
    web = containers["web"]
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert {p["name"]: p["containerPort"] for p in web["ports"]} == {"http": 8000}
    assert {"name": "PORT", "value": "8000"} in web["env"]
    for name in ("worker", "beat"):
        env = {e["name"]: e["value"] for e in containers[name]["env"]}
        probe = containers[name]["livenessProbe"]["exec"]["command"]
        assert probe[:3] == ["vancetope", "health", env["VANCETOPE_HEALTH_FILE"]]
    beat = next(d for d in manifests() if d["kind"] == "Deployment"
                and d["metadata"]["name"] == "vancetope-beat")
    assert beat["spec"]["replicas"] == 1 and beat["spec"]["strategy"]["type"] == "Recreate"
    config = next(d for d in manifests() if d["kind"] == "ConfigMap")["data"]
    assert [k for k in config if k not in VARIABLES] == []
