"""Load the effective config: defaults < YAML file < ``RUYI_*`` environment < command-line flags."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

from config.schema import Config
from config.validate import ConfigError, build, to_data

# Environment shortcuts; any key is also reachable as RUYI_<SECTION>__<KEY> (e.g. RUYI_LIMITS__MAX_BODY_BYTES).
ENV_SHORTCUTS = {
    "RUYI_UPSTREAM": "default_route.url",
    "RUYI_UPSTREAM_KIND": "default_route.kind",
    "RUYI_HOST": "server.host",
    "RUYI_PORT": "server.port",
    "RUYI_LOG_LEVEL": "logging.level",
    "RUYI_DATA_DIR": "store.data_dir",
}
NOT_KEYS = {"RUYI_CONFIG"}
CONFIG_SEPARATOR = "__"
"""Config variables are RUYI_<SECTION>__<KEY>; other RUYI_* names (a client key read by ``env:``, a tool's own
setting) are not Ruyi's config and are left alone."""
SECRET_KEYS = {"api_key", "keys", "admin_key", "key"}


def guess_kind(url: str) -> str:
    """``ollama`` for Ollama's usual address, ``anthropic`` for Anthropic's API, ``openai`` for anything else (``…/v1`` servers)."""
    parts = urlsplit(url)
    if parts.port == 11434 or "ollama" in (parts.hostname or ""):
        return "ollama"
    if (parts.hostname or "").endswith("anthropic.com"):
        return "anthropic"
    return "openai"


def is_config_variable(name: str) -> bool:
    """A documented shortcut, or ``RUYI_<SECTION>__<KEY>``."""
    return name in ENV_SHORTCUTS or (name.startswith("RUYI_") and CONFIG_SEPARATOR in name[5:])


def ignored_variables(env: Mapping[str, str]) -> list[str]:
    """The ``RUYI_*`` names in ``env`` that are not config (their values are never looked at)."""
    return sorted(n for n in env if n.startswith("RUYI_") and n not in NOT_KEYS and not is_config_variable(n))


def load_config(
    path: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Read, merge and validate; raises ``ConfigError`` naming the file (or variable) and key."""
    env = env or {}
    path = path or env.get("RUYI_CONFIG") or None
    merged: dict[str, Any] = {}
    origins: dict[str, str] = {}
    if path:
        _merge(merged, origins, _read_yaml(Path(path)), str(path))
    for name, value in sorted(env.items()):
        if not is_config_variable(name):
            continue
        key = ENV_SHORTCUTS.get(name) or name[5:].lower().replace(CONFIG_SEPARATOR, ".")
        _set(merged, origins, key, yaml.safe_load(value) if value else value, f"environment variable {name}")
    for key, value in (overrides or {}).items():
        if value is not None:
            _set(merged, origins, key, value, f"command-line flag for {key}")
    route = merged.get("default_route")
    if isinstance(route, dict) and "url" in route and "kind" not in route and isinstance(route["url"], str):
        route["kind"] = guess_kind(route["url"])
    try:
        return build(Config, merged, source=str(path) if path else "defaults")
    except ConfigError as exc:
        source = _origin(origins, exc.key)
        if source:
            raise ConfigError(source, exc.key, exc.detail) from None
        raise


def effective_yaml(config: Config) -> str:
    """The effective config as YAML, with secrets shown as ``***``."""
    return yaml.safe_dump(_redact(to_data(config)), sort_keys=False)


def _redact(data: Any, key: str = "") -> Any:
    if isinstance(data, dict):
        return {k: _redact(v, k) for k, v in data.items()}
    if isinstance(data, list):
        return [_redact(v, key) for v in data]
    if key in SECRET_KEYS and isinstance(data, str) and not data.startswith("env:"):
        return "***"
    if key == "url" and isinstance(data, str) and urlsplit(data).password:  # postgresql://user:password@host/db
        parts = urlsplit(data)
        return urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@", 1)))
    return data


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(path), "", f"cannot read the file ({exc.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "?"
        raise ConfigError(str(path), where, f"not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(str(path), "(top level)", "expected a mapping of sections")
    return data


def _merge(into: dict[str, Any], origins: dict[str, str], data: dict[str, Any], source: str, prefix: str = "") -> None:
    for key, value in data.items():
        full = f"{prefix}{key}"
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], origins, value, source, full + ".")
        else:
            into[key] = value
        origins[full] = source


def _set(into: dict[str, Any], origins: dict[str, str], dotted: str, value: Any, source: str) -> None:
    *parents, last = dotted.split(".")
    node = into
    for part in parents:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[last] = value
    origins[dotted] = source


def _origin(origins: dict[str, str], key: str) -> str | None:
    key = key.split("[", 1)[0]
    below = next((source for name, source in origins.items() if name.startswith(key + ".")), None)
    while key:
        if key in origins:
            return origins[key]
        key = key.rpartition(".")[0]
    return below  # an unknown section set only through its keys (RUYI_SERVR__PORT)
