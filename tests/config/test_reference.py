"""The configuration reference: docs/configuration.md is what the schema's field docs render, and documents every key."""

from __future__ import annotations

import dataclasses
import re
import typing

import pytest

from config.reference import DOC_PATH, field_docs, render
from config.schema import Config
from proxy.cli import main


def _leaf_keys(cls: type, prefix: str = "") -> list[tuple[str, type, str]]:
    """(dotted key, the class declaring it, field name) for every key that is not itself a section."""
    hints, out = typing.get_type_hints(cls), []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp) and isinstance(tp, type):
            out.extend(_leaf_keys(tp, prefix + f.name + "."))
        else:
            out.append((prefix + f.name, cls, f.name))
    return out


def test_committed_reference_is_current() -> None:
    assert DOC_PATH.read_text(encoding="utf-8") == render(), (
        "docs/configuration.md is stale: run `ruyi config reference --write` (or python -m config.reference --write)"
    )


def test_every_key_is_documented_in_the_schema_and_the_reference() -> None:
    text = render()
    keys = _leaf_keys(Config)
    assert len(keys) > 100
    undocumented = [key for key, cls, name in keys if not field_docs(cls).get(name)]
    assert undocumented == [], "give these fields a docstring in their Options"
    rows = set(re.findall(r"^\| `([\w.]+)` \|", text, flags=re.M))
    assert {key for key, _, _ in keys} <= rows
    empty = [ln for ln in text.splitlines() if ln.startswith("| `") and ln.endswith("| |")]
    assert empty == [], "list entries (routes, auth.keys, pruning.tools, agents) need field docs too"


def test_a_field_doc_reaches_the_reference_with_type_and_default() -> None:
    row = next(ln for ln in render().splitlines() if ln.startswith("| `server.port` |"))
    assert row == "| `server.port` | integer | `8787` | TCP port to listen on. |"
    literal = next(ln for ln in render().splitlines() if ln.startswith("| `logging.level` |"))
    assert "`debug` \\| `info` \\| `warning` \\| `error`" in literal and '`"info"`' in literal


def test_cli_prints_the_reference(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "reference"]) == 0
    assert capsys.readouterr().out == render()
