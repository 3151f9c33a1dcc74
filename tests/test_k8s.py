"""No cluster here: the Kubernetes examples (k8s/) parsed and checked against Ruyi's CLI, config, routes and Dockerfile."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from config.load import load_config
from proxy.cli import build_parser
from proxy.http.app import make_app

ROOT = Path(__file__).resolve().parents[1]
ENTRYPOINT = ["serve", "--host", "0.0.0.0"]
"""The image's entrypoint after `ruyi` (checked against the Dockerfile below)."""


def docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((ROOT / "k8s" / name).read_text()) if d]


def one(found: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    matches = [d for d in found if d["kind"] == kind]
    assert len(matches) == 1, f"one {kind} expected"
    return matches[0]


def container(deployment: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == name)


def env_of(c: dict[str, Any], found: list[dict[str, Any]]) -> dict[str, str]:
    """A container's environment, secrets read from the Secret of the same file (others: a placeholder)."""
    secrets = {d["metadata"]["name"]: d.get("stringData", {}) for d in found if d["kind"] == "Secret"}
    env = {}
    for item in c.get("env", []):
        if "value" in item:
            env[item["name"]] = str(item["value"])
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            env[item["name"]] = secrets.get(ref["name"], {}).get(ref["key"], "placeholder") if ref["name"] in secrets else "placeholder"
            assert ref["name"] not in secrets or ref["key"] in secrets[ref["name"]], f"{item['name']}: no key {ref['key']} in the Secret"
    return env


def probed(probe: dict[str, Any], c: dict[str, Any]) -> tuple[str, int]:
    """(path, port) a probe asks: httpGet's, or the URL an exec probe opens."""
    if "httpGet" in probe:
        port = probe["httpGet"]["port"]
        if isinstance(port, str):
            port = next(p["containerPort"] for p in c["ports"] if p["name"] == port)
        return probe["httpGet"]["path"], port
    url = re.search(r"http://127\.0\.0\.1:(\d+)(/\w+)", " ".join(probe["exec"]["command"]))
    assert url is not None, "an exec probe opens Ruyi's URL"
    return url.group(2), int(url.group(1))


def routes() -> set[str]:
    app = make_app(load_config(None, {}), probe_upstream=False)
    return {r.resource.canonical for r in app.router.routes() if r.resource is not None}


def test_the_image_entrypoint_is_what_the_manifests_add_arguments_to() -> None:
    entry = re.search(r"^ENTRYPOINT (.+)$", (ROOT / "Dockerfile").read_text(), re.M)
    assert entry is not None and entry.group(1).strip() == '["ruyi", "serve", "--host", "0.0.0.0"]'


def test_the_sidecar_shares_the_pod_loopback_with_its_agent() -> None:
    found = docs("sidecar.yaml")
    deployment = one(found, "Deployment")
    ruyi, agent = container(deployment, "ruyi"), container(deployment, "agent")
    args = build_parser().parse_args([*ENTRYPOINT, *ruyi.get("args", [])])
    assert args.host == "127.0.0.1"  # nothing outside the pod reaches it
    env = env_of(ruyi, found)
    config = load_config(None, env, {"server.host": args.host})
    port = config.server.port
    assert [p["containerPort"] for p in ruyi["ports"]] == [port]
    assert env_of(agent, found)["OPENAI_BASE_URL"] == f"http://127.0.0.1:{port}/v1"
    assert probed(ruyi["readinessProbe"], ruyi) == ("/readyz", port) and probed(ruyi["livenessProbe"], ruyi) == ("/healthz", port)
    assert {"/readyz", "/healthz"} <= routes()
    mounts = {m["mountPath"] for m in ruyi["volumeMounts"]}
    assert config.store.data_dir in mounts  # the SQLite file lives on the pod's volume
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > config.server.shutdown_grace_seconds


def test_the_replicas_share_postgresql_from_a_secret() -> None:
    found = docs("replicas.yaml")
    deployment, service, budget = one(found, "Deployment"), one(found, "Service"), one(found, "PodDisruptionBudget")
    ruyi = container(deployment, "ruyi")
    replicas = deployment["spec"]["replicas"]
    assert replicas >= 2 and budget["spec"]["minAvailable"] < replicas
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert service["spec"]["selector"].items() <= labels.items() and budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    names = {p["name"] for p in ruyi["ports"]}
    assert all(p["targetPort"] in names for p in service["spec"]["ports"])
    url = next(e for e in ruyi["env"] if e["name"] == "RUYI_STORE__URL")
    assert url["valueFrom"]["secretKeyRef"] == {"name": "ruyi", "key": "store-url"}  # never a literal in the manifest
    env = env_of(ruyi, found)
    assert env["RUYI_STORE__URL"].startswith("postgresql://") and env["RUYI_STORE__BACKEND"] == "postgres"
    port = next(p["containerPort"] for p in ruyi["ports"])
    assert probed(ruyi["readinessProbe"], ruyi) == ("/readyz", port) and probed(ruyi["livenessProbe"], ruyi) == ("/healthz", port)
    assert {"/readyz", "/healthz"} <= routes()
    config = load_config(None, env, {"server.host": "0.0.0.0"})
    assert config.store.shared and config.store.backend == "postgres" and config.server.port == port
    assert config.auth.keys == ("env:RUYI_CLIENT_KEY",) and env["RUYI_CLIENT_KEY"]  # on the pod network: clients need a key
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > config.server.shutdown_grace_seconds
