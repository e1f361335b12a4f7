"""Management of a router on several workers: which requests the siblings
are asked, and how their answers make one (router.management.workers)."""

from __future__ import annotations

from router.management import Response
from router.management.sources import remote_routers
from router.management.workers import LOCAL, Plan, merge_every, merge_first, merge_query, plan

P = "org.apache.qpid.dispatch."


def test_queries_of_what_each_worker_has_are_gathered() -> None:
    for entity in ("connection", "router.link", "router.address", "router"):
        assert plan({"operation": "QUERY", "type": "org.amqp.management",
                     "entityType": P + entity}) is Plan.QUERY
        assert plan({"operation": "QUERY", "type": P + entity}) is Plan.QUERY


def test_a_sibling_asked_answers_for_itself() -> None:
    assert plan({"operation": "QUERY", "entityType": P + "connection", LOCAL: True}) \
        is Plan.ALONE


def test_configuration_changes_are_made_everywhere_and_reads_are_not() -> None:
    for operation in ("CREATE", "UPDATE", "DELETE"):
        assert plan({"operation": operation, "type": P + "router.config.address"}) \
            is Plan.EVERYWHERE
    assert plan({"operation": "READ", "type": P + "router.config.address"}) is Plan.ALONE
    assert plan({"operation": "QUERY", "entityType": P + "listener"}) is Plan.ALONE
    assert plan({"operation": "GET-SCHEMA", "type": "org.amqp.management"}) is Plan.ALONE


def test_one_connection_or_link_is_looked_for_on_each_worker() -> None:
    for operation in ("READ", "UPDATE", "DELETE"):
        assert plan({"operation": operation, "type": P + "connection",
                     "identity": "7"}) is Plan.FIRST


def test_rows_of_every_worker_are_listed() -> None:
    names = ["identity", "host"]
    merged = merge_query("connection", [
        {"attributeNames": names, "results": [["1", "a"]]},
        {"attributeNames": names, "results": [["2", "b"], ["4", "c"]]},
    ])
    assert merged == {"attributeNames": names, "results": [["1", "a"], ["2", "b"], ["4", "c"]]}


def test_an_address_on_several_workers_is_one_row_with_counts_summed() -> None:
    names = ["identity", "distribution", "subscriberCount", "deliveriesIngress"]
    merged = merge_query("router.address", [
        {"attributeNames": names,
         "results": [["M0q", "balanced", 1, 10], ["M0r", "closest", 0, 1]]},
        {"attributeNames": names, "results": [["M0q", "balanced", 2, 5]]},
    ])
    assert isinstance(merged, dict)
    assert merged["results"] == [["M0q", "balanced", 3, 15], ["M0r", "closest", 0, 1]]


def test_the_router_is_one_row_named_for_the_router_with_counts_summed() -> None:
    names = ["id", "connectionCount", "acceptedDeliveries", "addrCount", "workerThreads"]
    merged = merge_query("router", [
        {"attributeNames": names, "results": [["R.w1", 3, 100, 7, 2]]},
        {"attributeNames": names, "results": [["R", 2, 50, 7, 2]]},
    ], router_id="R")
    assert isinstance(merged, dict)
    # Connections and deliveries add up; the addresses are the same ones on
    # each worker; the number of workers is a setting.
    assert merged["results"] == [["R", 5, 150, 7, 2]]


def test_the_first_worker_that_has_the_entity_answers() -> None:
    missing = Response(status=404, description="Not found")
    found = Response(status=200, description="OK", body={"identity": "7"})
    assert merge_first([missing, found]) is found
    assert merge_first([missing]) is None


def test_an_address_known_by_each_worker_counts_the_other_routers_once() -> None:
    names = ["identity", "subscriberCount", "remoteCount", "remoteHostRouters"]
    merged = merge_query("router.address", [
        {"attributeNames": names, "results": [["M0q", 1, 1, ["B"]]]},
        {"attributeNames": names, "results": [["M0q", 0, 2, ["B", "C"]]]},
    ])
    assert isinstance(merged, dict)
    # Local consumers add up; the other routers are the same ones each
    # worker hears of, counted once.
    assert merged["results"] == [["M0q", 1, 2, ["B", "C"]]]


def test_remote_routers_leave_out_siblings_and_make_another_routers_workers_one() -> None:
    siblings = frozenset({"A.w1"})
    assert remote_routers(["A.w1", "B", "B.w1", "C.w2"], siblings) == ["B", "C.w2"]
    # A worker of a router known to the network is that router, even when
    # the router's first worker has no consumer.
    assert remote_routers(["B.w1", "C.w2"], siblings, known={"B", "C"}) == ["B", "C"]
    # A router whose id only looks like a worker's is itself.
    assert remote_routers(["site.w2"], frozenset(), known={"other"}) == ["site.w2"]


def test_another_router_is_known_once_every_worker_knows_it() -> None:
    assert plan({"operation": "READ", "type": P + "router.node",
                 "identity": "router.node/B"}) is Plan.EVERY
    found = Response(status=200, description="OK", body={"id": "B"})
    missing = Response(status=404, description="Not found")
    assert merge_every(found, [found, found]) is found
    assert merge_every(found, [found, missing]) is missing
