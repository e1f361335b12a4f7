"""compute_routes on drawn topologies (docs/networks.md#link-state-and-paths).

Each test draws its topology; ``==`` marks the root. Links are bidirectional
with the cost written on them (1 when not written) unless the test says otherwise.
"""

from __future__ import annotations

from router.core.routing import Route, Routes, compute_routes


def links(*edges: tuple[str, str, int]) -> dict[str, dict[str, int]]:
    """Link states of bidirectional links (a, b, cost)."""
    states: dict[str, dict[str, int]] = {}
    for a, b, cost in edges:
        states.setdefault(a, {})[b] = cost
        states.setdefault(b, {})[a] = cost
    return states


def hops(routes: Routes) -> dict[str, str]:
    return {dest: route.next_hop for dest, route in routes.routes.items()}


def costs(routes: Routes) -> dict[str, int]:
    return {dest: route.cost for dest, route in routes.routes.items()}


def origins(routes: Routes) -> dict[str, set[str]]:
    return {dest: set(route.valid_origins) for dest, route in routes.routes.items()}


def test_line_from_the_end() -> None:
    """
    ==A== --- B --- C
    """
    routes = compute_routes(links(("A", "B", 1), ("B", "C", 1)), "A")
    assert routes.routes == {
        "B": Route(next_hop="B", cost=1, hops=1),
        "C": Route(next_hop="B", cost=2, hops=2),
    }
    assert routes.radius == 2


def test_line_from_the_middle_gives_each_end_as_origin_of_the_other() -> None:
    """
    A --- ==B== --- C
    """
    routes = compute_routes(links(("A", "B", 1), ("B", "C", 1)), "B")
    assert hops(routes) == {"A": "A", "C": "C"}
    assert origins(routes) == {"A": {"C"}, "C": {"A"}}
    assert routes.radius == 1
    assert routes.is_valid_origin("C", "A")
    assert routes.is_valid_origin("C", "B")  # the root is always a valid origin
    assert not routes.is_valid_origin("A", "A")


def test_triangle_prefers_two_cheap_links_over_one_dear_one() -> None:
    """
            ==A==
           1/   \\5
           B --1-- C
    """
    states = links(("A", "B", 1), ("B", "C", 1), ("A", "C", 5))
    at_a = compute_routes(states, "A")
    assert hops(at_a) == {"B": "B", "C": "B"}
    assert costs(at_a) == {"B": 1, "C": 2}
    assert origins(at_a) == {"B": set(), "C": set()}
    at_b = compute_routes(states, "B")
    assert origins(at_b) == {"A": {"C"}, "C": {"A"}}


def test_equal_triangle_path_and_valid_origin_differ() -> None:
    """
            ==A==
            /   \\
           B --- C

    A routes to C directly, but B reaches C directly too, so a message that
    entered at B and arrives at A must not be sent on to C: B is not a valid
    origin for C at A, although A has a route to C.
    """
    routes = compute_routes(links(("A", "B", 1), ("B", "C", 1), ("A", "C", 1)), "A")
    assert hops(routes) == {"B": "B", "C": "C"}
    assert origins(routes) == {"B": set(), "C": set()}
    assert not routes.is_valid_origin("C", "B")


def test_square_with_costs() -> None:
    """
        A --1-- ==B==
        |         |
        4         1
        |         |
        D --1---- C
    """
    states = links(("A", "B", 1), ("B", "C", 1), ("C", "D", 1), ("A", "D", 4))
    at_a = compute_routes(states, "A")
    assert hops(at_a) == {"B": "B", "C": "B", "D": "B"}
    assert costs(at_a) == {"B": 1, "C": 2, "D": 3}
    assert at_a.radius == 3
    at_b = compute_routes(states, "B")
    assert hops(at_b) == {"A": "A", "C": "C", "D": "C"}
    assert origins(at_b) == {"A": {"C", "D"}, "C": {"A"}, "D": {"A"}}
    assert at_b.radius == 2


def test_ties_go_to_the_lower_router_id_and_are_never_replaced() -> None:
    """
        ==A== --- B
          |       |
          D ----- C

    C costs 2 through B or D; B is resolved first (``"B" < "D"``), so C goes
    through B, and D's equal-cost path does not replace it. Likewise D's
    tree reaches B through A (A before C), so D is a valid origin for B here.
    """
    routes = compute_routes(links(("A", "B", 1), ("B", "C", 1), ("C", "D", 1), ("A", "D", 1)),
                            "A")
    assert hops(routes) == {"B": "B", "C": "B", "D": "D"}
    assert origins(routes) == {"B": {"D"}, "C": set(), "D": {"B"}}


def test_router_ids_compare_as_strings() -> None:
    """
        ==R1== --- R10
          |         |
          R9 ----- R5

    R5 costs 2 either way; "R10" < "R9" as strings, so R5 goes through R10.
    """
    states = links(("R1", "R10", 1), ("R10", "R5", 1), ("R5", "R9", 1), ("R1", "R9", 1))
    assert compute_routes(states, "R1").next_hop("R5") == "R10"


def test_two_rings_joined_at_the_root() -> None:
    """
        B --- C           F
        |     |          / \\
        A -- ==D== ---- E   G
                         \\ /
                          H

    Traffic between the rings crosses D: every router of one ring is a
    valid origin at D for every router of the other, never of its own.
    """
    states = links(("A", "B", 1), ("B", "C", 1), ("C", "D", 1), ("A", "D", 1),
                   ("D", "E", 1), ("E", "F", 1), ("F", "G", 1), ("G", "H", 1), ("E", "H", 1))
    routes = compute_routes(states, "D")
    left, right = {"A", "B", "C"}, {"E", "F", "G", "H"}
    for dest in left:
        assert origins(routes)[dest] >= right
    for dest in right:
        assert origins(routes)[dest] >= left
    assert origins(routes)["B"] == right  # A and C reach B directly
    assert routes.radius == 3


def test_directed_edges_are_used_as_reported() -> None:
    """
        ==A== --> B        B does not list A, so B cannot reach A.
    """
    states = {"A": {"B": 1}, "B": {}}
    assert hops(compute_routes(states, "A")) == {"B": "B"}
    assert compute_routes(states, "B").routes == {}


def test_router_known_only_as_a_peer_gets_a_placeholder_link_back() -> None:
    """
        ==A== --- B --- C      (no link state from C yet)

    C is reachable (to exchange link state) and, through its placeholder
    link to B, a valid origin at B for A.
    """
    states = {"A": {"B": 1}, "B": {"A": 1, "C": 3}}
    at_a = compute_routes(states, "A")
    assert costs(at_a) == {"B": 1, "C": 4}
    assert origins(compute_routes(states, "B")) == {"A": {"C"}, "C": {"A"}}


def test_placeholder_goes_back_to_the_lowest_reporter() -> None:
    """
        ==A== --- B --- X --- C     X has no link state; B and C both list it.
                  |           |
                  +---- D ----+
    """
    states = {
        "A": {"B": 1}, "B": {"A": 1, "X": 1, "D": 1}, "C": {"X": 1, "D": 1},
        "D": {"B": 1, "C": 1},
    }
    routes = compute_routes(states, "A")
    assert costs(routes) == {"B": 1, "X": 2, "D": 2, "C": 3}
    assert hops(compute_routes(states, "X")) == {"B": "B", "A": "B", "D": "B", "C": "B"}


def test_unreachable_routers_have_no_route() -> None:
    """
        ==A== --- B        C --- D
    """
    routes = compute_routes(links(("A", "B", 1), ("C", "D", 1)), "A")
    assert set(routes.routes) == {"B"}
    assert routes.next_hop("C") is None and routes.cost("D") is None


def test_lonely_root_has_radius_zero() -> None:
    assert compute_routes({"A": {}}, "A") == Routes(root="A")
    assert compute_routes({}, "A") == Routes(root="A")
