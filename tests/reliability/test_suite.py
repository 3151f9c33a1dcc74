"""The reliability suite's short versions (bench/reliability/suite.py): real `ruyi serve` processes on 127.0.0.1, small
counts; outcomes are checked, never timings (those are the long run's figures, in RELIABILITY.md)."""

from __future__ import annotations

import pytest

from bench.reliability.store_faults import full_disk, stalled_store
from bench.reliability.suite import bad_input, faults, key_leaks, load, slow_clients, soak

pytestmark = pytest.mark.timeout(180)


async def test_load_every_stream_completes_and_descriptors_come_back() -> None:
    figures = await load(20, settle_s=1.0)
    assert figures["ok"] == figures["direct_ok"] == 20
    assert figures["fds_after"] <= figures["fds_before"] + 60  # the upstream pool's kept connections at most


async def test_a_short_soak_answers_every_request() -> None:
    figures = await soak(3.0, 10.0, sessions=5)
    assert figures["requests"] >= 20 and figures["ok"] == figures["requests"]
    fresh = await soak(2.0, 10.0, sessions=5, turns=1, minimal=True)  # every request a new conversation; a bare proxy beside
    assert fresh["ok"] == fresh["requests"] >= 10
    assert fresh["minimal_ok"] == fresh["requests"] and fresh["minimal_ttfb_p50_ms"] > 0


async def test_a_held_database_holds_no_request_and_what_waited_lands() -> None:
    figures = await stalled_store(8, 1.0)
    assert figures["ok"] == 8 and figures["sessions_api"] == 200
    assert figures["deadline"]["stalled"] and figures["landed_after_release_s"] is not None
    assert figures["audited_agents"] == 8, "every audit record queued while the database was held was written after"


async def test_a_full_disk_fails_open_and_the_sessions_land_when_space_returns() -> None:
    figures = await full_disk(6)
    assert figures["ok"] == 6 and figures["healthz_while_full"] == 200 and figures["alive"]
    assert figures["unsaved_while_full"], "the writes did meet the full disk"
    assert figures["sessions_landed"] == 6, "every session started while the disk was full was written once space returned"
    assert figures["request_after"] == 200


async def test_upstream_faults_are_relayed_and_ruyi_stays_up() -> None:
    figures = await faults(2)
    assert figures["500"]["statuses"] == [500] and figures["429"]["statuses"] == [429]
    assert figures["stall"]["statuses"] == [504] and figures["cut"]["statuses"] == [200]
    assert all(case["healthy_after"] and case["alive"] for case in figures.values())


async def test_bad_input_is_refused_in_the_clients_format() -> None:
    figures = await bad_input(1)
    assert figures["malformed_json"] == [400] and figures["not_an_object"] == [400] and figures["many_headers"] == [400]
    assert figures["lone_surrogate"] == [200] and figures["traversal"] == [404]
    assert figures["healthy_after"] and figures["alive"]


async def test_slow_clients_are_cut_and_others_served() -> None:
    figures = await slow_clients(10)
    assert figures["cut"] == 10 and figures["normal_request"] == 200 and figures["alive"]


async def test_no_key_leaks_into_files_answers_or_other_addresses() -> None:
    figures = await key_leaks(2)
    assert figures == {"requests": 2, "files_with_secret": [], "answers_with_secret": 0, "attacker_connections": 0}
