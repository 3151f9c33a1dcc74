"""After an archive the stable part is rebuilt once, with the session's compact form and the yellow-light reminder, then
kept byte for byte, also by a Ruyi restarted on the same store."""

from __future__ import annotations

from typing import Any

from tests.conftest import MakeProxy
from tests.fake_upstream import FakeUpstream
from tests.layout.test_step import remember
from tests.longctx.sessions import SYSTEM, archive_message, block_after, session, turn
from tests.longctx.test_archive import CONFIG, forwarded, post


async def archived(proxy: Any, fake: FakeUpstream) -> tuple[int, list[dict[str, Any]]]:
    """Requests of a growing session until one archives; its turns and what was forwarded."""
    for turns in range(1, 40):
        resp = await post(proxy, session(turns))
        if "X-Ruyi-Archived" in resp.headers:
            return turns, forwarded(fake)
    raise AssertionError("no archive")


async def test_the_archive_brings_the_compact_form_and_the_reminder_then_the_same_bytes(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(**CONFIG)
    await remember(proxy)
    await post(proxy, session(1))
    before = forwarded(fake)[0]["content"]
    assert before.startswith(SYSTEM + "\n\n<ruyi-memory>") and "Yellow light" not in before
    turns, sent = await archived(proxy, fake)
    assert sent[0]["content"] == SYSTEM and archive_message(sent) == 1  # the system text alone, as sent
    block = block_after(sent[1], session(turns)[1])  # the task as sent, then the block
    archive_at, memory_at = block.index('<ruyi-archive n="1"'), block.index("<ruyi-memory>")
    assert archive_at < memory_at  # the archive block first, then the rebuilt stable part, in the block's message
    stable = block[memory_at:]
    assert "## After the archive" in stable and "🔸 Compact context" in stable and "Yellow light, not red" in stable
    assert "[C001] Never commit secrets" in stable
    for more in (1, 2):
        await post(proxy, session(turns) + [m for t in range(turns, turns + more) for m in turn(t)])
        assert forwarded(fake)[:2] == sent[:2]  # byte for byte until the next archive


async def test_with_the_block_in_the_system_message_the_stable_part_follows_it_there(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(**{**CONFIG, "archive": {"block": "system"}})
    await remember(proxy)
    turns, sent = await archived(proxy, fake)
    system = sent[0]["content"]
    assert system.startswith(SYSTEM + '\n\n<ruyi-archive n="1"') and system.index("</ruyi-archive>") < system.index("<ruyi-memory>")
    assert not any(m["role"] == "system" for m in sent[1:])


async def test_a_restarted_ruyi_forwards_the_same_stable_part(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(**CONFIG)
    await remember(proxy)
    await post(proxy, session(1))
    first = forwarded(fake)[0]["content"]
    await proxy.close()
    again = await make_proxy(**CONFIG)  # the same data dir: sessions and their decisions read back from the store
    await remember(again)  # memory changed meanwhile (new anchors): the stable part in force is still the one kept
    await post(again, session(2))
    assert forwarded(fake)[0]["content"] == first
