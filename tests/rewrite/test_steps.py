"""The story of the rewrite steps: each step's result handed to the later ones, a failing step skipped, the rest going on."""

from __future__ import annotations

from typing import Any

from config.schema import Config
from proxy import appkeys
from proxy.rewrite.pipeline import Pipeline
from proxy.rewrite.steps import Rewrite, default_steps
from tests.conftest import MakeProxy, base_url, config_for
from tests.fake_upstream import FakeUpstream
from tests.rewrite.test_pruning import WINDOW, conversation, post


class Raises:
    """A step with a bug, in the layout step's place."""

    name = "layout"

    def apply(self, *given: Any) -> Any:
        raise RuntimeError("a bug in the layout step")


def test_the_steps_run_in_the_order_they_depend_on() -> None:
    names = [step.name for step in Pipeline(default_steps(Config())).each_step()]
    assert names == ["rewrite_steps", "note", "restart", "layout_plan", "prune", "archive", "recall", "snapshot", "layout", "fit"]


async def test_a_failing_step_is_skipped_and_the_steps_after_it_get_what_it_was_given(
    make_proxy: MakeProxy, fake: FakeUpstream, upstream: Any
) -> None:
    cfg = config_for(base_url(upstream) + "/v1", "openai", window=WINDOW, pruning={"economic": False})
    rewrite = Rewrite(cfg)
    rewrite.layout = Raises()  # type: ignore[assignment]
    proxy = await make_proxy(config=cfg, steps=[rewrite])
    sent = []
    for turns in range(1, 12):
        resp = await post(proxy, conversation(turns))
        assert resp.status == 200
        sent.append(fake.last().json["messages"])
    failures = proxy.app[appkeys.PIPELINE].failures
    assert failures["layout"] == 11 and sum(failures.values()) == 11  # every request, nothing else
    assert any(m["role"] == "tool" and m["content"].startswith("[ruyi:") for m in sent[-1])  # pruned all the same
    assert int(resp.headers["X-Ruyi-Tokens-After"]) < int(resp.headers["X-Ruyi-Tokens-Before"])  # and fit after it counted
