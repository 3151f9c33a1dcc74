"""Config: precedence, default.yaml in step with the schema, and errors that name file, key and expectation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from config.load import effective_yaml, guess_kind, ignored_variables, load_config
from config.schema import Config
from config.validate import ConfigError, to_data

DEFAULT_YAML = Path(__file__).resolve().parents[2] / "config" / "default.yaml"


def test_default_yaml_documents_every_key_with_its_default() -> None:
    data = yaml.safe_load(DEFAULT_YAML.read_text())
    assert data == to_data(Config())
    lines = [ln for ln in DEFAULT_YAML.read_text().splitlines() if ":" in ln and not ln.lstrip().startswith("#")]
    assert all("#" in ln or ln.rstrip().endswith(":") for ln in lines), "every key has a one-line comment"
    assert load_config(DEFAULT_YAML) == Config()


def test_precedence_flag_over_env_over_file(tmp_path: Path) -> None:
    f = tmp_path / "ruyi.yaml"
    f.write_text("server:\n  port: 9000\n  host: 0.0.0.0\nlimits:\n  max_body_bytes: 5000\n")
    env = {"RUYI_PORT": "9100", "RUYI_LIMITS__MAX_BODY_BYTES": "6000"}
    cfg = load_config(f, env, {"server.port": 9200})
    assert (cfg.server.port, cfg.server.host, cfg.limits.max_body_bytes) == (9200, "0.0.0.0", 6000)
    assert load_config(f, env).server.port == 9100
    assert load_config(f, {}).server.port == 9000
    assert load_config(None, {"RUYI_CONFIG": str(f)}).server.port == 9000


@pytest.mark.parametrize(
    ("text", "key", "expected"),
    [
        ("servr:\n  port: 1\n", "servr", "unknown key"),
        ("server:\n  prot: 1\n", "server.prot", "unknown key"),
        ("server:\n  port: eighty\n", "server.port", "expected an integer"),
        ("server:\n  port: 70000\n", "server", "between 1 and 65535"),
        ("default_route:\n  kind: grpc\n", "default_route.kind", "'openai', 'ollama'"),
        ("default_route:\n  url: ftp://x\n", "default_route", "http(s) URL"),
        ("routes:\n  - model: 'gpt-*'\n    url: 3\n", "routes[0].url", "expected a string"),
        ("logging: [1]\n", "logging", "expected a mapping"),
        ("server: {port: [\n", "line", "not valid YAML"),
        ("pruning:\n  strategies:\n    truncation:\n      max_tool_output_tokens: -5\n", "pruning.strategies.truncation", "max_tool_output_tokens"),
        ("pruning:\n  strategies:\n    dedup:\n      colour: red\n", "pruning.strategies.dedup.colour", "unknown key"),
        ("pruning:\n  strategies:\n    enabled: [summarize]\n", "pruning.strategies", "unknown strategy 'summarize'"),
        ("pruning:\n  bogus: 1\n", "pruning.bogus", "unknown key"),
        ("pruning:\n  horizon_share: -1\n", "pruning", "horizon_share must be >= 0"),
        ("pruning:\n  strategies:\n    discard:\n      min_tokens: -1\n", "pruning.strategies.discard", "min_tokens"),
        ("pruning:\n  tools: [{name: view, kind: nonsense}]\n", "pruning.tools[0].kind", "expected one of"),
        ("tiers:\n  prune: 0.5\n", "tiers", "tiers.prune (0.5) must be above"),
        ("window:\n  models: [smollm2]\n", "window.models[0]", "[pattern, value] or {pattern: value}"),
        ("window:\n  models: [{a: 1, b: 2}]\n", "window.models[0]", "a mapping of one pattern"),
        ("window:\n  models: [[smollm2, 1, 2]]\n", "window.models[0]", "[pattern, value] or {pattern: value}"),
    ],
)
def test_bad_values_name_file_key_and_expectation(tmp_path: Path, text: str, key: str, expected: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(f, {})
    assert str(f) in str(err.value) and key in str(err.value) and expected in str(err.value)


def test_strategy_options_and_tools_from_yaml(tmp_path: Path) -> None:
    f = tmp_path / "ruyi.yaml"
    f.write_text(
        "pruning:\n  strategies:\n    enabled: [dedup]\n    truncation: {max_tool_output_tokens: 2000}\n"
        "  tools:\n    - {name: view_file, kind: read, path: [filename]}\n"
    )
    cfg = load_config(f, {})
    assert cfg.pruning.strategies.enabled == ("dedup",)
    assert cfg.pruning.strategies.truncation.max_tool_output_tokens == 2000
    table = cfg.pruning.tool_table()
    assert table["view_file"].kind == "read" and table["view_file"].path == ("filename",)
    assert table["Read"].kind == "read"  # the built-in entries stay


@pytest.mark.parametrize(
    "text",
    [
        "window:\n  models: [{smollm2: 8192}, {'qwen3:*': 40960}]\n",  # a list of one-key maps
        "window:\n  models: {smollm2: 8192, 'qwen3:*': 40960}\n",  # one map
        "window:\n  models: [[smollm2, 8192], ['qwen3:*', 40960]]\n",  # a list of pairs
        "window:\n  models:\n    - smollm2: 8192\n    - 'qwen3:*': 40960\n",  # block style of the first
    ],
)
def test_window_models_take_every_natural_spelling(tmp_path: Path, text: str) -> None:
    f = tmp_path / "ruyi.yaml"
    f.write_text(text)
    assert load_config(f, {}).window.models == (("smollm2", 8192), ("qwen3:*", 40960))


def test_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="environment variable RUYI_PORT: server.port: expected an integer"):
        load_config(None, {"RUYI_PORT": "abc"})


def test_ruyi_names_that_are_not_config_are_ignored_not_fatal() -> None:
    """Only RUYI_<SECTION>__<KEY> and the shortcuts are config: RUYI_CLIENT_KEY (read by env:) and the like are not."""
    env = {
        "RUYI_CLIENT_KEY": "abc",
        "RUYI_TRACE_DIR": "/traces",
        "RUYI_PORT": "9100",
        "RUYI_SERVER__HOST": "0.0.0.0",
        "RUYI_CONFIG": "",
        "OTHER": "x",
    }
    cfg = load_config(None, env)
    assert (cfg.server.port, cfg.server.host) == (9100, "0.0.0.0")
    assert ignored_variables(env) == ["RUYI_CLIENT_KEY", "RUYI_TRACE_DIR"]
    with pytest.raises(ConfigError, match="environment variable RUYI_SERVR__PORT: servr: unknown key"):
        load_config(None, {"RUYI_SERVR__PORT": "1"})  # the config form still names a wrong key


def test_upstream_kind_is_guessed_unless_given() -> None:
    assert guess_kind("http://127.0.0.1:11434") == "ollama"
    assert load_config(None, {"RUYI_UPSTREAM": "https://api.openai.com/v1"}).default_route.kind == "openai"
    assert load_config(None, {"RUYI_UPSTREAM": "http://gpu:8000", "RUYI_UPSTREAM_KIND": "ollama"}).default_route.kind == "ollama"


def test_secrets_resolve_from_env_and_never_print(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MY_UPSTREAM_KEY", "sk-from-env-123")
    f = tmp_path / "c.yaml"
    f.write_text("default_route:\n  api_key: env:MY_UPSTREAM_KEY\nauth:\n  keys: [literal-client-key]\n")
    cfg = load_config(f, {})
    assert cfg.default_route.key == "sk-from-env-123"
    shown = effective_yaml(cfg)
    assert "literal-client-key" not in shown and "sk-from-env-123" not in shown and "env:MY_UPSTREAM_KEY" in shown


def test_keys_that_name_their_agent_never_print(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("auth:\n  keys: [{key: literal-named-key, agent: agent-a}, env:K2]\n  admin_key: literal-admin-key\n")
    shown = effective_yaml(load_config(f, {}))
    assert "literal-named-key" not in shown and "literal-admin-key" not in shown
    assert "agent-a" in shown and "env:K2" in shown


def test_the_store_url_s_password_never_prints() -> None:
    cfg = load_config(None, {"RUYI_STORE__BACKEND": "postgres", "RUYI_STORE__URL": "postgresql://ruyi:pg-pass-123@db:5432/ruyi"})
    assert cfg.store.url == "postgresql://ruyi:pg-pass-123@db:5432/ruyi"
    shown = effective_yaml(cfg)
    assert "pg-pass-123" not in shown and "postgresql://ruyi:***@db:5432/ruyi" in shown


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "proxy.cli", *args], capture_output=True, text=True, timeout=60)


def test_cli_config_check_and_version(tmp_path: Path) -> None:
    ok = run_cli("config", "check", str(DEFAULT_YAML))
    assert ok.returncode == 0 and "port: 8787" in ok.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("server:\n  port: -1\n")
    res = run_cli("config", "check", str(bad))
    assert res.returncode == 2 and "Traceback" not in res.stderr and str(bad) in res.stderr
    assert run_cli("--version").stdout.startswith("ruyi ")


def test_layout_mode_off_unquoted_in_yaml_and_environment(tmp_path: Path) -> None:
    """YAML 1.1 reads an unquoted ``off`` as false: ``layout: {mode: off}`` and ``RUYI_LAYOUT__MODE=off`` still mean off."""
    f = tmp_path / "ruyi.yaml"
    f.write_text("layout:\n  mode: off\n", encoding="utf-8")
    assert load_config(f, {}).layout.mode == "off"
    assert load_config(None, {"RUYI_LAYOUT__MODE": "off"}).layout.mode == "off"
    f.write_text("layout:\n  mode: on\n", encoding="utf-8")  # not a mode: still a clear error
    with pytest.raises(ConfigError, match="layout.mode: expected one of"):
        load_config(f, {})


def test_postgres_implies_a_shared_store(tmp_path: Path) -> None:
    f = tmp_path / "ruyi.yaml"
    f.write_text("store:\n  backend: postgres\n  url: postgresql://u@127.0.0.1:5432/test\n  shared: false\n")
    assert load_config(f, {}).store.shared is True  # two replicas that did not say so would silently diverge
    assert load_config(None, {}).store.shared is False


def test_a_size_limit_postgres_would_not_keep_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "ruyi.yaml"
    f.write_text("store:\n  backend: postgres\n  url: postgresql://u@127.0.0.1:5432/test\n  max_bytes: 1000000\n")
    with pytest.raises(ConfigError, match="max_bytes is kept for SQLite only"):
        load_config(f, {})
    f.write_text("store:\n  max_bytes: 1000000\n")
    assert load_config(f, {}).store.max_bytes == 1_000_000


def test_an_archive_aims_at_a_share_of_the_window_at_most_target_max_tokens() -> None:
    archive = load_config(None, {}).archive
    assert (archive.aim(13_600), archive.aim(54_400)) == (3_400, 4_096)  # 16k: the quarter; 64k: the cap
    assert load_config(None, {"RUYI_ARCHIVE__TARGET_MAX_TOKENS": "null"}).archive.aim(54_400) == 13_600
    with pytest.raises(ConfigError, match="target_max_tokens must be at least 256"):
        load_config(None, {"RUYI_ARCHIVE__TARGET_MAX_TOKENS": "100"})
