"""The layout holds the architecture: rooms, their import directions, short modules with one-line docstrings."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("proxy", "strategies", "memory", "config", "redaction", "summaries")
MAX_LINES = 400
MAX_MODULES_PER_ROOM = 15

FORBIDDEN: dict[str, tuple[str, ...]] = {
    """Room (or package) → module prefixes it must never import."""
    "redaction": ("proxy", "memory", "config", "strategies"),
    "conversation.actions": ("proxy", "memory", "config", "strategies.base", "strategies.pipeline"),
    "strategies": ("proxy", "memory", "config", "summaries"),
    "memory.anchors": ("proxy", "strategies", "summaries", "memory.sessions", "memory.serialized", "memory.notebook"),
    "memory.notebook": ("proxy", "strategies", "summaries", "memory.sessions", "memory.serialized"),
    "memory.cards": ("proxy", "strategies", "summaries", "memory.sessions", "memory.serialized", "memory.notebook", "memory.anchors",
                     "memory.forms"),
    "memory.forms": ("proxy", "summaries", "memory.sessions", "memory.serialized"),
    "memory.store": ("proxy", "strategies", "summaries", "memory.sessions", "memory.serialized", "memory.sweep"),
    "memory": ("proxy", "strategies", "summaries"),
    "summaries": ("proxy", "memory", "config"),
    "config": ("proxy.http", "proxy.api", "proxy.flow", "proxy.replay"),
    "proxy.dialects": ("proxy.know", "proxy.rewrite", "proxy.replay", "proxy.api", "proxy.http", "proxy.flow",
                       "proxy.appkeys", "proxy.context", "memory", "strategies"),
    "proxy.know": ("proxy.rewrite", "proxy.replay", "proxy.api", "proxy.http", "proxy.flow", "strategies"),
    "proxy.keep": ("proxy.rewrite", "proxy.replay", "proxy.api", "proxy.http", "proxy.flow", "proxy.appkeys", "strategies"),
    "proxy.layout": ("proxy.rewrite", "proxy.replay", "proxy.api", "proxy.http", "proxy.flow", "proxy.appkeys", "strategies"),
    "proxy.longctx": ("proxy.rewrite", "proxy.replay", "proxy.api", "proxy.http", "proxy.flow", "proxy.appkeys"),
    "proxy.rewrite": ("proxy.replay", "proxy.api", "proxy.http", "proxy.flow"),
    "proxy.replay": ("proxy.api", "proxy.http", "proxy.flow"),
    "proxy.api": ("proxy.flow", "proxy.replay"),
    "proxy.observe": ("proxy.flow", "proxy.replay"),
    "proxy.http": ("proxy.replay",),
}


def modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def dotted(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, at_import_time: bool = False) -> set[str]:
    """Every module a file imports: anywhere (functions, TYPE_CHECKING), or only what runs when it is imported."""
    found: set[str] = set()
    package = dotted(path) if path.name == "__init__.py" else dotted(path).rpartition(".")[0]
    tree = ast.parse(path.read_text())
    nodes = ast.walk(tree)
    if at_import_time:
        nodes = iter([n for n in tree.body if not (isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test))])
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from pkg import module`
    return {name for name in found if name.split(".")[0] in PACKAGES}


def room_of(module: str) -> str:
    for room in sorted(FORBIDDEN, key=len, reverse=True):
        if module == room or module.startswith(room + "."):
            return room
    return module.split(".")[0]


def under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


@pytest.mark.parametrize("path", modules(), ids=lambda p: dotted(p) or p.name)
def test_module_opens_with_a_one_line_docstring_and_stays_short(path: Path) -> None:
    docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
    lines = docstring.strip().splitlines()
    assert lines and (len(lines) == 1 or not lines[1].strip()), "open with a one-line docstring (a summary line, then a blank line)"
    assert len(path.read_text().splitlines()) <= MAX_LINES, f"over {MAX_LINES} lines: split it"


@pytest.mark.parametrize("path", [p for p in modules() if p.name == "__init__.py"], ids=lambda p: dotted(p))
def test_a_package_does_no_work_at_import(path: Path) -> None:
    assert [type(node) for node in ast.parse(path.read_text()).body] == [ast.Expr]


def test_no_room_is_too_full_to_find_things_in() -> None:
    per_room = defaultdict(list)
    for path in modules():
        if path.name != "__init__.py":
            per_room[path.parent.relative_to(ROOT).as_posix()].append(path.stem)
    full = {room: len(names) for room, names in per_room.items() if len(names) > MAX_MODULES_PER_ROOM}
    assert not full, f"split these rooms (over {MAX_MODULES_PER_ROOM} modules): {full}"


def test_imports_go_only_in_the_allowed_directions() -> None:
    wrong = []
    for path in modules():
        name = dotted(path)
        for imported in imports_of(path):
            for prefix in FORBIDDEN.get(room_of(name), ()):
                if under(imported, prefix) and not under(imported, room_of(name)):
                    wrong.append(f"{name} imports {imported}")
    assert not wrong, "\n".join(sorted(set(wrong)))


def test_no_import_cycle_inside_a_room() -> None:
    """Module-level imports: one under ``if TYPE_CHECKING`` is for annotations, one in a function is deferred."""
    graph: dict[str, set[str]] = {}
    names = {dotted(p) for p in modules()}
    for path in modules():
        name = dotted(path)
        graph[name] = {m for m in imports_of(path, at_import_time=True) if m in names and m != name and room_of(m) == room_of(name)
                       and path.name != "__init__.py"}
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " → ".join(trail[trail.index(nxt):] + [node, nxt]) if nxt in trail else f"{node} → {nxt}")
            if nxt not in state:
                visit(nxt, trail + [node])
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node, [])


STRATEGY_TESTS = ROOT / "tests" / "strategies"


@pytest.mark.parametrize("path", sorted((ROOT / "strategies").rglob("*.py")), ids=lambda p: dotted(p))
def test_every_strategy_module_has_a_test_file(path: Path) -> None:
    if path.name == "__init__.py":
        return
    mirror = STRATEGY_TESTS / path.relative_to(ROOT / "strategies").parent / f"test_{path.stem}.py"
    assert mirror.exists(), f"no {mirror.relative_to(ROOT)}"


def test_the_tests_mirror_the_rooms() -> None:
    rooms = {p.parent.relative_to(ROOT).as_posix() for p in modules() if p.name == "__init__.py"}
    rooms = {r.removeprefix("proxy/") for r in rooms if r not in ("proxy",)}
    missing = sorted(r for r in rooms if not (ROOT / "tests" / r).is_dir())
    assert not missing, f"no tests/ folder for the rooms {missing}"


def test_the_readme_table_names_every_room_and_module() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("## Where things live"):]
    table = table[: table.index("\n## ")]
    missing = []
    for path in modules():
        room = path.parent.relative_to(ROOT).as_posix()
        if path.name == "__init__.py":
            if room != "proxy" and f"`{room}/`" not in table:
                missing.append(room + "/")
        elif f"`{path.stem}`" not in table and f"{path.stem}.py" not in table:
            missing.append(f"{room}/{path.name}")
    assert not missing, f"README's 'Where things live' does not name {missing}"
