"""The archive block the model reads: what happened, the active summary (S1), the archived chunks (S2) and how to recall them."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

OPEN = "<ruyi-archive"
CLOSE = "</ruyi-archive>"
_NUMBER = re.compile(r"<ruyi-archive n=\"(\d+)\"")
RECALL_PREFIX = "ruyi:"


@dataclass(frozen=True)
class ChunkLine:
    """One archived chunk as the block lists it."""

    chunk_id: str
    first: int
    last: int
    line: str


def archive_block(
    number: int,
    first: int,
    last: int,
    turns: int,
    summary: str,
    chunks: Sequence[ChunkLine],
    listed: int,
    chinese: bool,
    tool: str | None = None,
    recent: str = "",
    code: str = "",
    ids_only: bool = False,
) -> str:
    """The block appended to the system prompt: never silent about what was archived, and how to get it back.
    ``recent``: the agent's own newest archived messages, verbatim (``summaries.recent``), after the summary; ``code``:
    the map of the code it saw there (``summaries.codemap``), after them; ``ids_only``: the chunks listed by id and
    messages only (a small window: ``proxy.longctx.archive.small_window``).
    Nothing in it depends on the session's id, so a replayed conversation gets the same bytes."""
    shown = list(chunks)[-listed:] if listed else []
    older = len(chunks) - len(shown)
    if chinese:
        lines = [
            f'{OPEN} n="{number}" messages="{first}–{last}">',
            f"Ruyi（模型前的上下文代理）为腾出上下文窗口，已将消息 {first}–{last}（{turns} 轮）存档，由下面的摘要代替。"
            "系统提示、任务与最新的几轮均为原文；原文已被保存。",
            (
                f"需要细节时：在下一条消息里提到分块编号（如 {RECALL_PREFIX}{shown[-1].chunk_id}）或其中的文件名，Ruyi 会把该分块的摘要附上。"
                if shown
                else "需要细节时：在下一条消息里提到被存档部分的文件名，Ruyi 会把提到它的分块的摘要附上。"
            ),
        ]
        if tool:
            lines.append(f"你也可以直接调用 {tool}：id 填分块编号（{RECALL_PREFIX}c…）或 archive:{number}（本次存档的原始消息），或用 query 检索。")
        title, more = "已存档分块（S2）：", f"- 另有 {older} 个更早的分块（可检索）"
        recent_note = "你最近被存档的消息原文（[n] 为消息编号；只留下提到别处没有的名称的行）："
        code_note = "你在那里看过的代码（每个文件一行：[n] 为最后显示它的消息，L 为行号，括号里是其中用到的名称）："
    else:
        lines = [
            f'{OPEN} n="{number}" messages="{first}–{last}">',
            f"Ruyi, the context proxy before the model, archived messages {first}–{last} ({turns} turns) to free the context window: the "
            "summary below replaces them. The system prompt, the task and the newest turns are verbatim; the originals are kept.",
            (
                f"To recall details, name a chunk id (like {RECALL_PREFIX}{shown[-1].chunk_id}) or a file it names in your next message: "
                "Ruyi adds that chunk's summary."
                if shown
                else "To recall details, name a file of the archived part in your next message: Ruyi adds the summary of a chunk naming it."
            ),
        ]
        if tool:
            lines.append(
                f"You can also call {tool} yourself: with id a chunk id ({RECALL_PREFIX}c…) or archive:{number} (the raw "
                "messages this archive took), or with query some words to search them."
            )
        title, more = "Archived chunks (S2):", f"- and {older} older chunks (searchable)"
        recent_note = "Your newest archived messages, verbatim ([n]: the message's number; only lines naming what is kept nowhere else):"
        code_note = (
            "The code you saw there, a line per file ([n]: the message that showed it last; L: the line; in brackets the names its body used):"
        )
    lines += ["", "<summary>", summary.strip(), "</summary>"]
    if recent.strip():
        lines += ["", "<recent-work>", recent_note, recent.strip(), "</recent-work>"]
    if code.strip():
        lines += ["", "<code-map>", code_note, code.strip(), "</code-map>"]
    lines += ["", title]
    if older:
        lines.append(more)
    lines += [f"- {RECALL_PREFIX}{c.chunk_id} · {c.first}–{c.last}" + ("" if ids_only else f" · {c.line}") for c in shown]
    lines.append(CLOSE)
    return "\n".join(lines)


def archive_number(text: str | None) -> int:
    """The number of the archive a text carries (0 when it carries none)."""
    if not text or OPEN not in text:
        return 0
    match = _NUMBER.search(text)
    return int(match.group(1)) if match else 0
