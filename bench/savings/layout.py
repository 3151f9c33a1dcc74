"""Layout benchmark: what the sections cost the prompt cache, every public trace replayed with ``layout.mode`` off beside append.

Usage: ``python bench/savings/layout.py [--traces DIR] [--windows 32000] [--json]``.

Each variant replays every trace through the offline pipeline (bench/savings/savings.py's measures: tokens, cache hit of the
previous request, cost with caching at 10 %, needles, requests over the window), in one run:

- ``off``: Ruyi adds nothing (pruning and archives as by default);
- ``append, nothing stored``: the default config and no memory, workspace or cards: after an archive only the compact
  form and the yellow-light reminder are added (what bench/savings/savings.py's Ruyi row does);
- ``append``: the agent has a notebook (three entries), three active anchors (one constraint, two decisions), its
  workspace has an AGENTS.md (and a nested one) and three knowledge cards that match words the traces use;
- ``append, reminder false``: the same with ``layout.reminder: false`` (no compact form or reminder after an archive);
- ``append, cards about one project each``: six cards, each titled and tagged with one trace's project only;
- ``append + metadata``: the same with the metadata section on every request (time, agent, model, usage);
- ``full``: the seed's order (task, core template, notebook, rules) with metadata.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/savings/layout.py`: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.savings.savings import markdown_table, run_strategy
from bench.traces import TRACES, load_traces
from config.load import load_config
from proxy.keep.keeper import Keeper
from proxy.keep.options import NotebookOptions
from proxy.know.tokens import TokenCounter
from proxy.replay.offline import OfflineRuyi
from proxy.replay.run import Cl100kCounter, ReplayResult

FIELDS = {
    "alternatives": "ad-hoc prints",
    "why": "reproducible failures",
    "impact": "tests/",
    "verification": "the suite passes",
    "rollback": "revert the commit",
}
ANCHORS = (
    ("C", "Never change a public API without a deprecation"),
    ("D", "Reproduce every bug with a failing test first"),
    ("D", "Run the tests with python -m pytest"),
)
NOTES = (("user", "prefers minimal diffs"), ("environment", "Python 3.11 in a virtualenv"), ("self", "check the issue text twice"))
CARDS = {
    "tests.md": ("Running the test suite", ["pytest", "tests", "TestCase"], "Run `python -m pytest -x -q` from the repository root."),
    "git.md": ("Making the patch", ["git", "diff", "patch"], "Keep the diff minimal; never reformat files you did not change."),
    "errors.md": ("Reading a traceback", ["Traceback", "Error", "Exception"], "Start from the last frame inside the repository."),
}
PROJECT_CARDS = {
    "django.md": ("Django", ["django"], "Django: run makemigrations --check before a django patch."),
    "sqlfluff.md": ("sqlfluff", ["sqlfluff"], "sqlfluff: a rule returns LintResult objects."),
    "marshmallow.md": ("marshmallow", ["marshmallow"], "marshmallow: Nested takes a Schema."),
    "astroid.md": ("astroid", ["astroid"], "astroid: infer() may yield Uninferable."),
    "pvlib.md": ("pvlib", ["pvlib"], "pvlib: angles in degrees."),
    "pydicom.md": ("pydicom", ["pydicom"], "pydicom: private tags need a private creator."),
}
"""Cards about one project each: the worst case's opposite, a card only where its project's words are."""
RULES = "# Agent rules\n- Keep changes minimal and focused on the issue.\n- Add or update a test for every fix.\n"


def workspace(root: Path) -> None:
    """An AGENTS.md (and a nested one) and three knowledge cards under ``root``."""
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "AGENTS.md").write_text(RULES, encoding="utf-8")
    (root / "src" / "AGENTS.md").write_text("Sources live here; tests live in tests/.\n", encoding="utf-8")
    write_cards(root / ".ruyi" / "knowledge-cards", CARDS)


def write_cards(cards: Path, found: dict[str, tuple[str, list[str], str]]) -> None:
    cards.mkdir(parents=True, exist_ok=True)
    for name, (title, tags, body) in found.items():
        (cards / name).write_text(f"---\ntitle: {json.dumps(title)}\ntags: {json.dumps(tags)}\n---\n{body}\n", encoding="utf-8")


def remembered() -> Keeper:
    """An in-memory keeper holding the ``offline`` agent's notebook and anchors."""
    keeper = Keeper(None, NotebookOptions(), None)
    for section, text in NOTES:
        keeper.notebook.add("offline", section, text)
    for kind, title in ANCHORS:
        keeper.anchors.create("offline", {"type": kind, "title": title, "fields": FIELDS})
    return keeper


def variants(root: Path) -> dict[str, Any]:
    """Name → a factory of a fresh offline Ruyi per trace (window → rewrite)."""
    base = {"workspace.root": str(root)}
    configs: dict[str, tuple[dict[str, Any], bool]] = {
        "layout off": ({"layout.mode": "off"}, False),
        "layout append, nothing stored (the default user)": ({}, False),
        "layout append (notebook, 3 anchors, AGENTS.md, cards)": ({**base}, True),
        "layout append, reminder false": ({**base, "layout.reminder": False}, True),
        "layout append, no cards": ({**base, "cards.project_dir": str(root / "no-cards")}, True),
        "layout append, cards about one project each": ({**base, "cards.project_dir": str(root.parent / "project-cards")}, True),
        "layout append, cards every 5 steps": ({**base, "cards.trigger_interval": 5}, True),
        "layout append + metadata": ({**base, "layout.metadata": True}, True),
        "layout full": ({**base, "layout.mode": "full", "layout.core_template": "Follow the tool rules.\n{client_system}"}, True),
    }
    out = {}
    for name, (overrides, memory) in configs.items():
        config = load_config(None, {}, overrides)
        counter = TokenCounter(config.tokens)

        def factory(window: int, config: Any = config, counter: TokenCounter = counter, memory: bool = memory) -> OfflineRuyi:
            return OfflineRuyi(config, "gpt-4", window, counter, keeper=remembered() if memory else None)

        out[name] = factory
    return out


def sections(result: ReplayResult) -> dict[str, int]:
    """Tokens each section added, over all requests."""
    total: dict[str, int] = {}
    for row in result.rows:
        for name, n in row.layout.items():
            total[name] = total.get(name, 0) + n
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=TRACES, help="folder of trace files")
    parser.add_argument("--windows", default="32000", help="comma-separated windows in tokens")
    parser.add_argument("--json", action="store_true", help="print JSON totals instead of markdown tables")
    args = parser.parse_args(argv)
    if args.traces is None:
        print("no public traces here (set RUYI_TRACE_DIR)", file=sys.stderr)
        return 0
    traces = load_traces(args.traces)
    count = Cl100kCounter()
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ruyi-layout-") as tmp:
        root = Path(tmp) / "workspace"
        workspace(root)
        write_cards(Path(tmp) / "project-cards", PROJECT_CARDS)
        for window in (int(w) for w in args.windows.split(",")):
            rows: dict[str, ReplayResult] = {}
            for name, factory in variants(root).items():
                started = time.perf_counter()
                rows[name] = run_strategy(factory, traces, window, count, name)
                report.setdefault(str(window), {})[name] = asdict(rows[name].totals) | {
                    "sections": sections(rows[name]),
                    "seconds": round(time.perf_counter() - started, 2),
                }
            off = rows["layout off"].totals.cache_hit_rate
            if not args.json:
                print(markdown_table(window, rows) + "\n")
                for name, result in rows.items():
                    added = sections(result)
                    carded = sum(1 for row in result.rows if row.layout.get("cards"))
                    print(
                        f"- {name}: cache hit {100 * (result.totals.cache_hit_rate - off):+.2f} points vs off; requests with cards "
                        f"{carded} of {len(result.rows)}; tokens added " + (", ".join(f"{k} {v:,}" for k, v in added.items()) or "none")
                    )
                print()
    if args.json:
        print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
