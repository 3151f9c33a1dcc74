"""House rules for strategies/: every module has a test file, a one-line docstring, and stays short."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SOURCE = Path(__file__).parents[2] / "strategies"
MODULES = sorted(p for p in SOURCE.glob("*.py") if p.name != "__init__.py")


@pytest.mark.parametrize("module", MODULES, ids=[m.stem for m in MODULES])
def test_module_has_a_test_file_a_docstring_and_stays_short(module: Path) -> None:
    assert (Path(__file__).parent / f"test_{module.stem}.py").exists(), f"no tests/strategies/test_{module.stem}.py"
    tree = ast.parse(module.read_text())
    docstring = ast.get_docstring(tree)
    assert docstring and "\n" not in docstring.strip(), "open with a one-line docstring"
    assert len(module.read_text().splitlines()) <= 300


def test_the_package_does_no_work_at_import() -> None:
    tree = ast.parse((SOURCE / "__init__.py").read_text())
    assert [type(node) for node in tree.body] == [ast.Expr]
