"""The layout holds the architecture: rooms, their import directions, short modules with one-line docstrings."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("proxy", "strategies", "conversation", "memory", "config", "redaction", "summaries")
FOLDERS_CHECKED = (*PACKAGES, "bench")
"""Where no import circle between folders and no folder over MAX_MODULES_PER_ROOM is allowed: every package, bench/ too."""
MAX_LINES = 400
MAX_MODULES_PER_ROOM = 15

FORBIDDEN: dict[str, tuple[str, ...]] = {
    """Room (or package) → module prefixes it must never import."""
    "redaction": ("proxy", "memory", "config", "strategies"),
    "conversation.actions": ("proxy", "memory", "config", "strategies", "summaries", "conversation.messages"),
    "conversation": ("proxy", "memory", "config", "strategies", "summaries"),
    "strategies": ("proxy", "memory", "config", "summaries"),
    "memory.anchors": ("proxy", "strategies", "summaries", "memory.sessions", "memory.serialized", "memory.notebook"),
    "memory.notebook": ("proxy", "strategies", "summaries", "memory.sessions", "memory.serialized"),
    "memory.cards": ("proxy", "strategies", "summaries", "memory.sessions", "memory.serialized", "memory.notebook", "memory.anchors", "memory.forms"),
    "memory.forms": ("proxy", "strategies", "summaries", "memory.sessions", "memory.serialized"),
    "memory.store": ("proxy", "strategies", "summaries", "memory.sessions", "memory.serialized", "memory.sweep"),
    "memory": ("proxy", "strategies", "summaries"),
    "summaries": ("proxy", "memory", "config"),
    "config": ("proxy.http", "proxy.api", "proxy.flow", "proxy.replay"),
    "proxy.dialects": (
        "proxy.know",
        "proxy.rewrite",
        "proxy.replay",
        "proxy.api",
        "proxy.http",
        "proxy.flow",
        "proxy.appkeys",
        "proxy.context",
        "memory",
        "strategies",
    ),
    "proxy.know": ("proxy.rewrite", "proxy.replay", "proxy.api", "proxy.http", "proxy.flow", "strategies"),
    "proxy.keep": ("proxy.rewrite", "proxy.replay", "proxy.api", "proxy.http", "proxy.flow", "proxy.appkeys", "strategies"),
    "proxy.layout": ("proxy.rewrite", "proxy.replay", "proxy.api", "proxy.http", "proxy.flow", "proxy.appkeys", "strategies"),
    "proxy.longctx": ("proxy.rewrite", "proxy.replay", "proxy.api", "proxy.http", "proxy.flow", "proxy.appkeys"),
    "proxy.rewrite": ("proxy.replay", "proxy.api", "proxy.http", "proxy.flow"),
    "proxy.replay": ("proxy.api", "proxy.http", "proxy.flow"),
    "proxy.api": ("proxy.flow", "proxy.replay"),
    "proxy.observe": ("proxy.flow", "proxy.replay"),
    "proxy.http": ("proxy.replay",),
    "proxy.translate": ("proxy.replay", "proxy.api", "proxy.flow"),
}


def modules(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> list[Path]:
    return sorted(p for pkg in packages for p in (root / pkg).rglob("*.py"))


def dotted(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, at_import_time: bool = False, root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> set[str]:
    """Every module a file imports: anywhere (functions, TYPE_CHECKING), or only what runs when it is imported."""
    found: set[str] = set()
    package = dotted(path, root) if path.name == "__init__.py" else dotted(path, root).rpartition(".")[0]
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
    return {name for name in found if name.split(".")[0] in packages}


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


def too_full(root: Path, packages: tuple[str, ...]) -> dict[str, int]:
    """Folders holding more than MAX_MODULES_PER_ROOM modules (``__init__`` not counted)."""
    per_room = defaultdict(list)
    for path in modules(root, packages):
        if path.name != "__init__.py":
            per_room[path.parent.relative_to(root).as_posix()].append(path.stem)
    return {room: len(names) for room, names in per_room.items() if len(names) > MAX_MODULES_PER_ROOM}


def test_no_room_is_too_full_to_find_things_in() -> None:
    full = too_full(ROOT, FOLDERS_CHECKED)
    assert not full, f"split these rooms (over {MAX_MODULES_PER_ROOM} modules): {full}"


def test_a_room_over_the_limit_is_found(tmp_path: Path) -> None:
    for i in range(MAX_MODULES_PER_ROOM + 1):
        (tmp_path / "bench" / "replay").mkdir(parents=True, exist_ok=True)
        (tmp_path / "bench" / "replay" / f"m{i}.py").write_text('"""A module."""\n')
    (tmp_path / "bench" / "few.py").write_text('"""A module."""\n')
    assert too_full(tmp_path, ("bench",)) == {"bench/replay": MAX_MODULES_PER_ROOM + 1}


def folder_graph(root: Path, packages: tuple[str, ...]) -> dict[str, dict[str, set[str]]]:
    """Folder → the folders its modules import → which imports: every import counts, at module level, deferred
    (inside a function) and under ``if TYPE_CHECKING``; importing a package counts as importing its folder."""
    paths = {dotted(p, root): p for p in modules(root, packages)}
    graph: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for name, path in paths.items():
        here = path.parent.relative_to(root).as_posix()
        for imported in imports_of(path, root=root, packages=packages):
            while imported and imported not in paths:  # `from pkg.mod import name`: the module, not the name
                imported = imported.rpartition(".")[0]
            there = paths[imported].parent.relative_to(root).as_posix() if imported else here
            if there != here:
                graph[here][there].add(f"{name} imports {imported}")
    return graph


def circles(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """The import circles between folders: each a set of folders every one of which reaches every other (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(folder: str) -> None:
        index[folder] = low[folder] = len(index)
        stack.append(folder)
        for nxt in sorted(graph.get(folder, {})):
            if nxt not in index:
                visit(nxt)
                low[folder] = min(low[folder], low[nxt])
            elif nxt in stack:
                low[folder] = min(low[folder], index[nxt])
        if low[folder] == index[folder]:
            circle = []
            while True:
                member = stack.pop()
                circle.append(member)
                if member == folder:
                    break
            if len(circle) > 1:
                found.append(sorted(circle))

    for folder in sorted(graph):
        if folder not in index:
            visit(folder)
    return found


def describe(graph: dict[str, dict[str, set[str]]], circle: list[str]) -> str:
    edges = [f"  {a} → {b}: {', '.join(sorted(graph[a][b])[:3])}" for a in circle for b in sorted(graph.get(a, {})) if b in circle]
    return "import circle between " + ", ".join(circle) + "\n" + "\n".join(edges)


LEAVES = (
    "proxy/ holds both the story (flow, cli) and the leaves every room reads (context, appkeys, json_codec,"
    " offload, routes): the leaves to a room of their own"
)
UNDONE_YET: dict[tuple[str, str], str] = {
    ("proxy/api", "proxy"): LEAVES,
    ("proxy/dialects", "proxy"): LEAVES,
    ("proxy/http", "proxy"): LEAVES,
    ("proxy/keep", "proxy"): LEAVES,
    ("proxy/know", "proxy"): LEAVES,
    ("proxy/layout", "proxy"): LEAVES,
    ("proxy/observe", "proxy"): LEAVES,
    ("proxy/replay", "proxy"): LEAVES,
    ("proxy/rewrite", "proxy"): LEAVES + " (the story's restructuring)",
    ("proxy/keep", "config"): "keep/command.py (CLI) loads the whole config: the CLI's commands to the CLI's room",
    ("proxy/observe", "config"): "observe/command.py (CLI) loads the config; audit_file raises config's ConfigError",
    ("proxy/know", "config"): "know/measure.py takes the whole Config (routes, server, store, sessions, pruning)",
    ("proxy/longctx", "config"): "longctx/command.py (CLI) takes the whole Config",
    ("proxy/rewrite", "config"): "rewrite/steps.py builds the steps from the whole Config",
    ("proxy/mcp", "proxy"): LEAVES,
    ("proxy/ui", "proxy"): LEAVES,
    ("proxy/translate", "proxy"): LEAVES,
    ("proxy/api", "proxy/http"): "api/admin.py checks keys with http/auth.py, which http/app.py mounts beside the API",
    ("proxy/observe", "proxy/http"): "observe/endpoint.py checks keys with http/auth.py",
    ("proxy/mcp", "proxy/http"): "mcp/endpoint.py checks keys with http/auth.py",
    ("proxy/ui", "proxy/http"): "ui/pages.py checks callers with http/auth.py",
    ("memory/store", "memory"): "store/writer.py reads memory/safe_text.py, a leaf for memory/store/ (full at 15 modules)",
}
"""Imports that still close a circle between folders, each to be undone by the work named (a ratchet: the test fails
when one of them is gone, so that it leaves this list, and on any circle they do not explain)."""


def test_no_import_circle_between_folders() -> None:
    graph = folder_graph(ROOT, FOLDERS_CHECKED)
    gone = [edge for edge in UNDONE_YET if edge[1] not in graph.get(edge[0], {})]
    assert not gone, f"these imports are undone: take them out of UNDONE_YET {gone}"
    for here, there in UNDONE_YET:
        del graph[here][there]
    found = circles(graph)
    assert not found, "\n".join(describe(graph, c) for c in found)


def test_a_circle_between_folders_is_found_deferred_and_type_only_imports_too(tmp_path: Path) -> None:
    def write(path: str, text: str) -> None:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)

    write("app/__init__.py", '"""App."""\n')
    write("app/low/__init__.py", '"""Low."""\n')
    write("app/low/options.py", '"""Options."""\n')
    write("app/high.py", '"""High."""\nfrom app.low.options import X\n')
    write("cfg/__init__.py", '"""Config."""\n')
    write("cfg/schema.py", '"""Schema."""\nfrom app.low import options\n')
    assert circles(folder_graph(tmp_path, ("app", "cfg"))) == []
    write("app/low/deferred.py", '"""Deferred."""\ndef f():\n    from app.high import Y\n')
    assert circles(folder_graph(tmp_path, ("app", "cfg"))) == [["app", "app/low"]]
    (tmp_path / "app/low/deferred.py").unlink()
    write("app/low/typed.py", '"""Typed."""\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cfg.schema import Config\n')
    graph = folder_graph(tmp_path, ("app", "cfg"))
    assert circles(graph) == [["app/low", "cfg"]]
    assert "app.low.typed imports cfg.schema" in describe(graph, ["app/low", "cfg"])


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
        graph[name] = {
            m
            for m in imports_of(path, at_import_time=True)
            if m in names and m != name and room_of(m) == room_of(name) and path.name != "__init__.py"
        }
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " → ".join(trail[trail.index(nxt) :] + [node, nxt]) if nxt in trail else f"{node} → {nxt}")
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
    table = readme[readme.index("## Where things live") :]
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
