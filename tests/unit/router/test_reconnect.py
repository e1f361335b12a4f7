"""The connector's back-off schedule and failover list (router.core.reconnect)."""

from __future__ import annotations

import pytest

from router.adapter.connections.state import failover_server_list
from router.core.reconnect import (
    AcceptBackoff,
    Endpoint,
    Failover,
    ReconnectPolicy,
    parse_failover_urls,
)


def test_exponential_back_off_doubles_up_to_the_maximum() -> None:
    policy = ReconnectPolicy(initial_s=0.01, max_s=0.1, jitter=0.0)
    assert [policy.delay(n, 0.5) for n in range(1, 7)] == \
        pytest.approx([0.01, 0.02, 0.04, 0.08, 0.1, 0.1])


def test_a_fixed_delay_without_exponential_back_off() -> None:
    policy = ReconnectPolicy(initial_s=0.5, exponential=False, jitter=0.0)
    assert {policy.delay(n, 0.3) for n in range(1, 20)} == {0.5}


def test_jitter_spreads_the_delay_both_ways_within_the_maximum() -> None:
    policy = ReconnectPolicy(initial_s=1.0, max_s=30.0, jitter=0.2)
    assert policy.delay(1, 0.0) == pytest.approx(0.8)
    assert policy.delay(1, 0.999999) == pytest.approx(1.2, abs=1e-5)
    capped = ReconnectPolicy(initial_s=30.0, max_s=30.0, jitter=0.2)
    assert capped.delay(3, 0.999) == 30.0


def test_max_attempts_gives_up() -> None:
    policy = ReconnectPolicy(max_attempts=3, jitter=0.0)
    assert policy.delay(2, 0.5) is not None
    assert policy.delay(3, 0.5) is None
    assert ReconnectPolicy(max_attempts=0).delay(10_000, 0.5) is not None


def test_failover_urls_parse_with_defaults_and_ipv6() -> None:
    assert parse_failover_urls(" h1:5673, amqps://h2 ,[::1]:7000,, ") == [
        Endpoint("h1", 5673), Endpoint("h2", 5672, "amqps"), Endpoint("::1", 7000)]
    for bad in ("h1:port", ":5672", "h1:70000", "[::1", "h1:5²"):
        with pytest.raises(ValueError, match="bad failover URL"):
            parse_failover_urls(bad)


def test_failover_rotates_through_the_entries_and_back() -> None:
    failover = Failover([Endpoint("a", 1), Endpoint("b", 2)])
    assert failover.current == Endpoint("a", 1)
    assert failover.advance() == Endpoint("b", 2)
    assert failover.listing() == "amqp://b:2, amqp://a:1"
    assert failover.advance() == Endpoint("a", 1)


def test_learnt_entries_replace_earlier_ones_and_keep_the_current_peer() -> None:
    failover = Failover([Endpoint("a", 1)])
    failover.learn([Endpoint("x", 9), Endpoint("a", 1)])
    assert failover.entries == [Endpoint("a", 1), Endpoint("x", 9)]
    failover.advance()
    failover.learn([Endpoint("y", 8), Endpoint("x", 9)])
    assert failover.current == Endpoint("x", 9), "the entry in use stays current"
    failover.learn([])
    assert failover.entries == [Endpoint("a", 1), Endpoint("x", 9)], \
        "the entry in use stays until it fails"
    assert failover.current == Endpoint("x", 9)
    assert failover.listing() == "amqp://x:9, amqp://a:1"
    failover.advance()
    failover.learn([])
    assert failover.entries == [Endpoint("a", 1)] and failover.current == Endpoint("a", 1)


def test_accepting_pauses_longer_after_each_failure_and_reports_once_per_interval() -> None:
    backoff = AcceptBackoff(initial_s=0.05, max_s=0.4, report_every_s=10.0)
    assert backoff.failed(100.0) == 1, "the first failure is reported at once"
    assert backoff.resume_at == pytest.approx(100.05)
    resumes = []
    for n in range(1, 6):
        backoff.resume()
        assert backoff.failed(100.0 + n) is None, "within the interval: only counted"
        assert backoff.resume_at is not None
        resumes.append(round(backoff.resume_at - (100.0 + n), 3))
    assert resumes == [0.1, 0.2, 0.4, 0.4, 0.4]
    assert backoff.failed(110.0) == 6, "next report: every failure since the last one"
    assert backoff.failures == 7
    assert backoff.succeeded(110.5) == 7 and backoff.succeeded(110.6) == 0
    backoff.resume()
    backoff.failed(111.0)
    assert backoff.resume_at == pytest.approx(111.05), "a success starts the back-off over"
    backoff.resume()
    assert backoff.succeeded(111.1) == 0, "recovered again within the interval: not reported"
    backoff.failed(115.0)
    backoff.resume()
    assert backoff.succeeded(121.0) == 2, "every failure since the last recovery report"


def test_a_peer_s_failover_list_keeps_only_entries_with_a_host_and_a_port() -> None:
    announced = {"failover-server-list": [
        {"network-host": "h1", "port": "5²"},          # a digit only to str.isdigit
        {"network-host": "h2", "port": "6000", "scheme": "amqps"},
        {"port": "7000"}, "not a map", {"network-host": "h3"}]}
    assert failover_server_list(announced) == [Endpoint("h2", 6000, "amqps"),
                                               Endpoint("h3", 5672)]
    assert failover_server_list({"other": 1}) is None
