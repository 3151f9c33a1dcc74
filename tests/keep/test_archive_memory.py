"""Each archive leaves a dynamic-pool line and proposes what its turns established: notebook entries and pending anchors,
marked proposed, never over a person's, never again once rejected."""

from __future__ import annotations

import aiohttp

from tests.api.test_anchors_api import call
from tests.api.test_archive_api import api
from tests.conftest import MakeProxy, base_url
from tests.fake_upstream import FakeUpstream
from tests.keep.test_subagents import PROMPTS, start_parent
from tests.longctx.sessions import session, turn
from tests.longctx.test_archive import CONFIG, post

SAID = "Good. I prefer small commits with clear messages. You must not change the public API."


async def test_an_archive_leaves_a_pool_line_and_proposals(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(**CONFIG)
    client = session(8)
    client[2]["content"] = "We decided to validate empty input in parse() itself. Step 0."
    client[3]["content"] = "<returncode>0</returncode>\n<output>\nPython 3.11.7\n</output>"
    client.insert(4, {"role": "user", "content": SAID})  # said by the user in the turns the archive will cover
    sid = (await post(proxy, client)).headers["X-Ruyi-Session"]
    assert (await api(proxy, "POST", f"/ruyi/v1/sessions/{sid}/archive"))[0] == 200
    client += turn(8)
    assert (await post(proxy, client)).headers["X-Ruyi-Archived"] == "1"
    async with aiohttp.ClientSession() as http:
        status, nb = await call(http, "GET", base_url(proxy) + "/ruyi/v1/notebook", agent="a")
        pool = [e["text"] for e in nb["sections"]["dynamic"]["entries"]]
        assert any(f"session {sid}: archive 1 (requested)" in line for line in pool)
        assert [(e["text"], e["by"]) for e in nb["sections"]["user"]["entries"]] == [("I prefer small commits with clear messages.", "proposed")]
        assert [e["text"] for e in nb["sections"]["environment"]["entries"]] == ["Python 3.11.7"]
        assert nb["sections"]["history"]["entries"][0]["text"].startswith(f"session {sid} archived messages")
        status, listed = await call(http, "GET", base_url(proxy) + "/ruyi/v1/anchors", agent="a")
        proposed = {(a["type"], a["status"], a["source"]): a["title"] for a in listed["anchors"]}
        assert proposed[("D", "pending", "proposed")] == "We decided to validate empty input in parse() itself."
        assert proposed[("C", "pending", "proposed")] == "You must not change the public API."
        status, _ = await call(http, "POST", base_url(proxy) + "/ruyi/v1/notebook/user/0/reject", agent="a")
        assert status == 200
        assert (await call(http, "GET", base_url(proxy) + "/ruyi/v1/notebook", agent="b"))[1]["version"] == 0


async def test_a_sub_agents_archive_leaves_its_line_in_its_own_notebook_and_proposes_nothing(make_proxy: MakeProxy, fake: FakeUpstream) -> None:
    proxy = await make_proxy(**CONFIG)
    parent = await start_parent(proxy, fake)
    client = session(8, task=PROMPTS[0])  # the child: its first user message is the parent's Task prompt
    client.insert(4, {"role": "user", "content": SAID})
    kid = (await post(proxy, client)).headers["X-Ruyi-Session"]
    assert kid != parent and fake.last().json["messages"][0]["content"].startswith(f'<ruyi-snapshot parent="{parent}">')
    assert (await api(proxy, "POST", f"/ruyi/v1/sessions/{kid}/archive"))[0] == 200
    client += turn(8)
    assert (await post(proxy, client)).headers["X-Ruyi-Archived"] == "1"
    async with aiohttp.ClientSession() as http:
        status, own = await call(http, "GET", base_url(proxy) + "/ruyi/v1/notebook", agent="a", params={"session": kid})
        assert any(f"session {kid}: archive 1 (requested)" in e["text"] for e in own["sections"]["dynamic"]["entries"])
        assert own["sections"]["user"]["entries"] == []  # proposals are the agent's business, never a child's
        status, agents = await call(http, "GET", base_url(proxy) + "/ruyi/v1/notebook", agent="a")
        assert agents["version"] == 0 and all(not s["entries"] for s in agents["sections"].values())
        status, listed = await call(http, "GET", base_url(proxy) + "/ruyi/v1/anchors", agent="a")
        assert [a["source"] for a in listed["anchors"]] == ["person"]  # start_parent's D001 only: nothing proposed from the child
