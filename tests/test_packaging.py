"""No Docker engine runs here: check the Dockerfile and compose file statically against the CLI."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import yaml

from config.load import load_config
from proxy.cli import build_parser
from proxy.http.auth import is_local
from proxy.http.exposure import exposure_warnings

ROOT = Path(__file__).resolve().parents[1]


def instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n\s*", " ", (ROOT / "Dockerfile").read_text())
    return [(ln.split(None, 1)[0].upper(), ln.split(None, 1)[1]) for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


def test_dockerfile_stages_user_healthcheck_entrypoint() -> None:
    steps = instructions()
    froms = [arg for op, arg in steps if op == "FROM"]
    assert len(froms) == 2 and all("slim" in f for f in froms)
    runtime = steps[[i for i, (op, _) in enumerate(steps) if op == "FROM"][-1] :]
    users = [arg for op, arg in runtime if op == "USER"]
    assert users and users[-1] not in ("root", "0")
    health = [arg for op, arg in runtime if op == "HEALTHCHECK"]
    assert health and "/healthz" in health[0]
    entry = json.loads([arg for op, arg in runtime if op == "ENTRYPOINT"][0])
    assert entry[:2] == ["ruyi", "serve"]
    args = build_parser().parse_args(entry[1:])  # the entrypoint's flags are ones the CLI accepts
    assert args.host == "0.0.0.0"
    port = load_config(None, {}).server.port
    assert ("EXPOSE", str(port)) in runtime
    copied = {arg.split()[0] for op, arg in steps if op == "COPY" and "--from" not in arg}
    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = {pattern.rstrip("*") for pattern in found}
    assert packages <= copied
    rooms = {p.parent.relative_to(ROOT).as_posix().replace("/", ".") for top in packages for p in (ROOT / top).rglob("__init__.py")}
    assert all(any(room.startswith(top) for top in packages) for room in rooms)  # every room is installed


def test_compose_puts_ruyi_in_front_of_ollama() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert services["ollama"]["image"].startswith("ollama/ollama")
    ruyi = services["ruyi"]
    assert ruyi["build"] == "." and "ollama" in ruyi["depends_on"]
    env = ruyi["environment"]
    assert load_config(None, env).default_route.url == "http://ollama:11434"
    assert ruyi["ports"] == ["127.0.0.1:8787:8787"]  # this machine only
    data_dir = next(arg.split("=", 1)[1] for op, arg in instructions() if op == "ENV" for arg in arg.split() if arg.startswith("RUYI_DATA_DIR="))
    assert any(v.endswith(":" + data_dir) for v in ruyi["volumes"])  # the state volume is where the image keeps state


def test_compose_keeps_ollama_pull_working_through_ruyi_and_says_its_exposure_is_intended() -> None:
    ruyi = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["ruyi"]
    entry = json.loads([arg for op, arg in instructions() if op == "ENTRYPOINT"][0])
    args = build_parser().parse_args(entry[1:])
    config = load_config(None, ruyi["environment"], {"server.host": args.host})
    for gateway in ("172.17.0.1", "172.18.0.1", "192.168.65.1"):  # how the host's calls arrive in the container
        assert is_local(gateway, config.auth)
    assert not is_local("10.1.2.3", config.auth)
    assert exposure_warnings(config) == []
