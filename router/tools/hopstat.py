"""The ``hopstat`` command: a running router's state as tables, as qdstat prints them.

Owns the views (which entity each option queries, the columns, titles and
cell formats qdstat 1.19 uses for them) and the table layout, plain or CSV.
A value the router does not report at all is shown as ``-``; a null one as
an empty cell, as qdstat does.  Talking to the router is ``client``'s job;
this module must not import ``router.adapter`` or ``router.cli``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Final, Protocol

import attrs
import click

import router
from router.tools.client import (
    DEFAULT_TIMEOUT_S,
    DEFAULT_URL,
    PREFIX,
    ManagementClient,
    StatusError,
    ToolError,
)
from router.tools.tables import (
    ABSENT,
    Formatter,
    Row,
    Table,
    address_parts,
    cell,
    commas,
    kmg,
    plain,
    render_csv,
    render_plain,
    sorted_by,
    table,
    text,
    time_long,
    time_short,
)


class Management(Protocol):
    """What the views ask of a router (``client.ManagementClient`` in use)."""

    def query(self, entity_type: str | None, attribute_names: Iterable[str] = (),
              limit: int | None = None) -> list[dict[str, Any]]: ...

    def node_call(self, operation: str, body: object = None, **properties: object) -> Any: ...


# -- views ---------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Options:
    """What every view may look at besides the router."""

    limit: int | None = None
    verbose: bool = False


#: A view's output: tables and lines of text, in order.
Output = list[Table | str]


def _query(client: Management, short_type: str, options: Options,
           *, limit: bool = True) -> list[dict[str, Any]]:
    return client.query(PREFIX + short_type, limit=options.limit if limit else None)


def _has(rows: Sequence[Row], name: str) -> bool:
    """qdstat adds optional columns when the first row has the attribute."""
    return bool(rows) and name in rows[0]


def general(client: Management, options: Options) -> Output:
    """``-g``: the router entity as attribute/value pairs."""
    rows = _query(client, "router", options, limit=False)
    r: Row = rows[0] if rows else {}

    def value(name: str, fmt: Formatter = plain) -> str:
        return cell(r, name, fmt) or ABSENT

    pairs = [("Version", value("version", text)), ("Mode", value("mode", text)),
             ("Router Id", value("id", text))]
    if "workerThreads" in r:
        pairs.append(("Worker Threads", value("workerThreads")))
    if "uptimeSeconds" in r:
        pairs.append(("Uptime", value("uptimeSeconds", time_long)))
    memory = r.get("memoryUsage")
    if isinstance(memory, int) and memory > 0:
        pairs.append(("VmSize", kmg(memory, 1024)))
    # Hop's own: what is resident, and what the C allocator holds.
    for label, name in (("Resident Memory", "residentMemory"), ("C Heap In Use", "heapInUse")):
        size = r.get(name)
        if isinstance(size, int) and size > 0:
            pairs.append((label, kmg(size, 1024)))
    pairs += [
        ("Area", value("area", text)),
        ("Link Routes", value("linkRouteCount")),
        ("Auto Links", value("autoLinkCount")),
        ("Links", value("linkCount")),
        ("Nodes", value("nodeCount")),
        ("Addresses", value("addrCount")),
        ("Connections", value("connectionCount")),
        ("Presettled Count", value("presettledDeliveries")),
        ("Dropped Presettled Count", value("droppedPresettledDeliveries")),
        ("Accepted Count", value("acceptedDeliveries")),
        ("Rejected Count", value("rejectedDeliveries")),
        ("Released Count", value("releasedDeliveries")),
        ("Modified Count", value("modifiedDeliveries")),
    ]
    optional = (("Deliveries Delayed > 1sec", "deliveriesDelayed1Sec"),
                ("Deliveries Delayed > 10sec", "deliveriesDelayed10Sec"),
                ("Deliveries Stuck > 10sec", "deliveriesStuck"),
                ("Deliveries to Fallback", "deliveriesRedirectedToFallback"),
                ("Deliveries Forwarded Again", "deliveriesRedelivered"),
                ("Deliveries Streamed", "deliveriesStreamed"),
                ("Streamed and Aborted", "deliveriesStreamedAborted"),
                ("Streaming Pauses", "streamingPauses"),
                ("Links Blocked", "linksBlocked"))
    pairs += [(label, value(name)) for label, name in optional if name in r]
    pairs += [
        ("Ingress Count", value("deliveriesIngress")),
        ("Egress Count", value("deliveriesEgress")),
        ("Transit Count", value("deliveriesTransit")),
        ("Deliveries from Route Container", value("deliveriesIngressRouteContainer")),
        ("Deliveries to Route Container", value("deliveriesEgressRouteContainer")),
    ]
    return [table("Router Statistics", ("attr", "value"), pairs)]


def _security(conn: Row) -> str:
    if not conn.get("isEncrypted"):
        return "no-security"
    if conn.get("sasl") == "GSSAPI":
        return "Kerberos"
    return f"{conn.get('sslProto')}({conn.get('sslCipher')})"


def _authentication(conn: Row) -> str:
    if not conn.get("isAuthenticated"):
        return "no-auth"
    sasl = conn.get("sasl")
    sasl = {"GSSAPI": "Kerberos", "EXTERNAL": "x.509"}.get(str(sasl), sasl)
    if sasl == "ANONYMOUS":
        return "anonymous-user"
    user = conn.get("user")
    return f"{user}({sasl})" if user else str(sasl)


def connections(client: Management, options: Options) -> Output:
    """``-c``: one row per connection."""
    conns = _query(client, "connection", options)
    headers = ["id", "host", "container", "role", "proto", "dir", "security",
               "authentication", "tenant"]
    last_dlv, uptime = _has(conns, "lastDlvSeconds"), _has(conns, "uptimeSeconds")
    headers += ["last dlv"] * last_dlv + ["uptime"] * uptime
    rows = []
    for c in conns:
        row = [cell(c, "identity"), cell(c, "host"), cell(c, "container"), cell(c, "role"),
               cell(c, "protocol"), cell(c, "dir"), _security(c), _authentication(c),
               cell(c, "tenant", lambda v: str(v).removesuffix("/"))]
        if last_dlv:
            row.append(cell(c, "lastDlvSeconds", time_long) or "-")
        if uptime:
            row.append(cell(c, "uptimeSeconds", time_long))
        rows.append(row)
    return [table("Connections", headers, rows)]


def edges(client: Management, options: Options) -> Output:
    """``-e``: the edge connections (an interior's edge routers, an edge's uplinks)."""
    conns = [c for c in _query(client, "connection", options) if c.get("role") == "edge"]
    if not conns:
        return ["No Edge Router Connections"]
    headers = ["id", "host", "container", "role", "dir", "security", "authentication",
               "tenant"]
    active = _has(conns, "active")
    headers += ["active"] * active
    rows = []
    for c in conns:
        row = [cell(c, "identity"), cell(c, "host"), cell(c, "container"), cell(c, "role"),
               cell(c, "dir"), _security(c), _authentication(c),
               cell(c, "tenant", lambda v: str(v).removesuffix("/"))]
        if active:
            row.append("yes" if c.get("active") else "no")
        rows.append(row)
    return [table("Connections", headers, rows)]


def _delay(link: Row) -> str:
    one, ten = link.get("deliveriesDelayed1Sec"), link.get("deliveriesDelayed10Sec")
    if not isinstance(one, int) or not isinstance(ten, int):
        return ""
    return plain(one + ten)


def _blocked(link: Row) -> str:
    seconds = link.get("zeroCreditSeconds")
    if isinstance(seconds, int) and seconds > 0:
        return time_short(seconds)
    return "-"


def links(client: Management, options: Options) -> Output:
    """``-l``: one row per router link, with its address and delivery counters."""
    found = _query(client, "router.link", options)
    counters = [("undel", "undeliveredCount"), ("unsett", "unsettledCount"),
                ("deliv", "deliveryCount"), ("presett", "presettledCount")]
    if _has(found, "droppedPresettledCount"):
        counters.append(("psdrop", "droppedPresettledCount"))
    counters += [("acc", "acceptedCount"), ("rej", "rejectedCount"),
                 ("rel", "releasedCount"), ("mod", "modifiedCount")]
    priority, delayed = _has(found, "priority"), _has(found, "deliveriesDelayed1Sec")
    stuck, credit = _has(found, "deliveriesStuck"), _has(found, "creditAvailable")
    headers = ["type", "dir", "conn id", "id", "peer", "class", "addr", "phs", "cap",
               *["pri"] * priority, *(h for h, _ in counters), *["delay", "rate"] * delayed,
               *["stuck"] * stuck, *["cred", "blkd"] * credit]
    if options.verbose:
        headers += ["admin", "oper", "name"]
    rows = []
    for link in found:
        row = [cell(link, "linkType"), cell(link, "linkDir"), cell(link, "connectionId"),
               cell(link, "identity"), cell(link, "peer"),
               *address_parts(link.get("owningAddr")), cell(link, "capacity", plain)]
        if priority:
            row.append(cell(link, "priority", plain))
        row += [cell(link, name, plain) for _, name in counters]
        if delayed:
            row += [_delay(link), cell(link, "settleRate", plain)]
        if stuck:
            row.append(cell(link, "deliveriesStuck", plain))
        if credit:
            row += [cell(link, "creditAvailable", plain), _blocked(link)]
        if options.verbose:
            row += [cell(link, "adminStatus"), cell(link, "operStatus"), cell(link, "linkName")]
        rows.append(row)
    return [table("Router Links", headers, rows)]


def nodes(client: Management, options: Options) -> Output:
    """``-n``: the routers of the network, with the next hop or link to each."""
    found = _query(client, "router.node", options)
    if not found:
        return ["Router is Standalone - No Router List"]
    headers = ["router-id", "next-hop", "link"]
    if options.verbose:
        headers += ["ver", "cost", "neighbors", "valid-origins"]
    rows = []
    last_change = 0.0
    for node in found:
        changed = node.get("lastTopoChange")
        if isinstance(changed, int | float):
            last_change = max(last_change, float(changed))
        if node.get("nextHop") is not None:
            row = [cell(node, "id"), cell(node, "nextHop"), "-"]
        else:
            row = [cell(node, "id"), "-", cell(node, "routerLink", plain) or "-"]
        if options.verbose:
            row += [cell(node, "protocolVersion", plain), cell(node, "cost", plain),
                    cell(node, "linkState", _names), cell(node, "validOrigins", _names)]
        rows.append(row)
    title = "Routers in the Network"
    if last_change > 1.0:
        stamp = time.strftime("%A %b %d %H:%M:%S %Y", time.gmtime(last_change))
        title += f"\nLast Topology Change: {stamp} GMT"
    return [table(title, headers, sorted_by(headers, "router-id", rows))]


def _names(values: Any) -> str:
    return repr([str(v) for v in values or []])


def addresses(client: Management, options: Options) -> Output:
    """``-a``: one row per address the router knows, with its delivery counters."""
    found = _query(client, "router.address", options)
    priority = _has(found, "priority")
    verbose = options.verbose
    # Hop's re-forwarding count: a column only where some address used it.
    again = any(a.get("deliveriesRedelivered") for a in found)
    headers = ["class", "addr", "phs", "distrib", *["pri"] * priority,
               *["in-proc"] * verbose, "local", "remote", "in", "out", "thru", "fallback",
               *["again"] * again, *["to-proc", "from-proc"] * verbose]
    rows = []
    for a in found:
        key = a.get("name")
        row = [*address_parts(key), cell(a, "distribution")]
        if priority:
            pri = a.get("priority")
            row.append(plain(pri) if isinstance(pri, int) and pri >= 0 else "-")
        if verbose:
            row.append(cell(a, "inProcess", commas))
        link_routed = isinstance(key, str) and key[:1] in ("C", "D", "E", "F")
        row += [cell(a, "containerCount" if link_routed else "subscriberCount", commas),
                *(cell(a, name, commas) for name in (
                    "remoteCount", "deliveriesIngress", "deliveriesEgress", "deliveriesTransit",
                    "deliveriesRedirectedToFallback"))]
        if again:
            row.append(cell(a, "deliveriesRedelivered", commas))
        if verbose:
            row += [cell(a, "deliveriesToContainer", commas),
                    cell(a, "deliveriesFromContainer", commas)]
        rows.append(row)
    return [table("Router Addresses", headers, sorted_by(headers, "addr", rows))]


def autolinks(client: Management, options: Options) -> Output:
    """``--autolinks``: the configured auto-links and their state."""
    found = _query(client, "router.config.autoLink", options)
    if not found:
        return ["AutoLinks", "No AutoLinks found"]
    headers = ["addr", "dir", "phs", "extAddr", "link", "status", "lastErr"]
    rows = [[cell(a, "address"), cell(a, "direction"), cell(a, "phase", plain),
             cell(a, "externalAddress"), cell(a, "linkRef"), cell(a, "operStatus"),
             cell(a, "lastError")] for a in found]
    return [table("AutoLinks", headers, sorted_by(headers, "addr", rows))]


def linkroutes(client: Management, options: Options) -> Output:
    """``--linkroutes``: the configured link routes and their state."""
    found = _query(client, "router.config.linkRoute", options)
    if not found:
        return ["Link Routes", "No Link Routes found"]
    headers = ["address", "dir", "distrib", "status"]
    prefixes = any(r.get("addExternalPrefix") or r.get("delExternalPrefix") for r in found)
    if prefixes:
        headers += ["add-ext-prefix", "del-ext-prefix"]
    rows = []
    for r in found:
        row = [str(r.get("prefix") or r.get("pattern") or ""), cell(r, "direction"),
               cell(r, "distribution"), cell(r, "operStatus")]
        if prefixes:
            row += [cell(r, "addExternalPrefix"), cell(r, "delExternalPrefix")]
        rows.append(row)
    return [table("Link Routes", headers, sorted_by(headers, "address", rows))]


def tcp(client: Management, options: Options) -> Output:
    """``--tcp``: the TCP bridges with their counts, then each carried TCP
    connection, its client's side (in) and its service's (out) (docs/tcp.md)."""
    out: Output = []
    try:
        bridges = [("listener", b) for b in _query(client, "tcpListener", options)]
        bridges += [("connector", b) for b in _query(client, "tcpConnector", options)]
    except StatusError:  # a router without TCP bridges (qdrouterd 1.19 on)
        return ["TCP Bridges", "No TCP bridges: the router does not have them"]
    if not bridges:
        return ["TCP Bridges", "No TCP bridges found"]
    headers = ["name", "kind", "address", "host", "port", "opened", "closed", "refused",
               "bytes in", "bytes out"]
    rows = [[cell(b, "name"), kind, cell(b, "address"), cell(b, "host"), cell(b, "port"),
             *(cell(b, n, commas) for n in ("connectionsOpened", "connectionsClosed",
                                            "connectionsRefused", "bytesIn", "bytesOut"))]
            for kind, b in bridges]
    out += [table("TCP Bridges", headers, sorted_by(headers, "name", rows)), ""]
    conns = _query(client, "tcpConnection", options)
    if not conns:
        return [*out, "TCP Connections", "No TCP connections"]
    headers = ["id", "dir", "address", "host", "bytes in", "bytes out", "uptime", "last in",
               "last out"]
    rows = [[cell(c, "identity").split("/", 1)[-1].split(":", 1)[0], cell(c, "direction"),
             cell(c, "address"), cell(c, "host"), cell(c, "bytesIn", commas),
             cell(c, "bytesOut", commas), cell(c, "uptimeSeconds", time_long),
             cell(c, "lastInSeconds", time_long), cell(c, "lastOutSeconds", time_long)]
            for c in conns]
    return [*out, table("TCP Connections", headers, rows)]


def memory(client: Management, options: Options) -> Output:
    """``-m``: memory pools when the router keeps them (Hop does not), and the
    process size the router entity reports."""
    try:
        pools = _query(client, "allocator", options, limit=False)
    except StatusError:
        pools = []
    pools = [p for p in pools if p.get("totalAllocFromHeap") is not None]
    out: Output = []
    pooled: int | None = None
    if pools:
        headers = ["type", "size", "batch", "thread-max", "total", "in-threads", "rebal-in",
                   "rebal-out"]
        names = ("typeSize", "transferBatchSize", "localFreeListMax", "totalAllocFromHeap",
                 "heldByThreads", "batchesRebalancedToThreads", "batchesRebalancedToGlobal")
        rows = [[str(p.get("typeName") or p.get("identity") or ""),
                 *(cell(p, n, plain) for n in names)] for p in pools]
        out += [table("Memory Pools", headers, sorted_by(headers, "type", rows)), ""]
        pooled = sum(int(p.get("typeSize") or 0) * int(p["totalAllocFromHeap"]) for p in pools)
    else:
        out.append("No memory pool statistics: the router does not keep memory pools")
        out.append("")
    routers = _query(client, "router", options, limit=False)
    size = routers[0].get("memoryUsage") if routers else None
    out.append(table("Memory Summary", ("VmSize", "Pooled"), [(
        kmg(size, 1024) if isinstance(size, int) else "-",
        kmg(pooled, 1024) if pooled is not None else "-")]))
    return out


def log_lines(client: Management, options: Options) -> Output:
    """``--log``: the router's recent log records, oldest first."""
    records = client.node_call("GET-LOG", limit=options.limit)
    lines: Output = []
    for record in records or []:
        # [module, level, text, source file, source line, epoch seconds]
        try:
            stamp = time.ctime(float(record[5]))
            lines.append(f"{stamp} {record[0]} ({record[1]}) {record[2]}")
        except (IndexError, TypeError, ValueError):
            lines.append(str(record))
    return lines


# -- the command ---------------------------------------------------------------


@attrs.frozen(kw_only=True)
class View:
    """One display option: its flags, its help and what it prints."""

    flags: tuple[str, ...]
    help: str
    show: Callable[[Management, Options], Output]
    #: Preceded by the date and the router's id, as qdstat does.
    dated: bool = True

    @property
    def dest(self) -> str:
        return self.flags[-1].lstrip("-")


VIEWS: Final = (
    View(flags=("-g", "--general"), help="Show general router statistics (the default).",
         show=general),
    View(flags=("-c", "--connections"), help="Show connections.", show=connections),
    View(flags=("-l", "--links"), help="Show router links.", show=links),
    View(flags=("-e", "--edge"), help="Show edge connections.", show=edges),
    View(flags=("-n", "--nodes"), help="Show the routers of the network.", show=nodes),
    View(flags=("-a", "--address"), help="Show router addresses.", show=addresses),
    View(flags=("-m", "--memory"),
         help="Show memory statistics (Hop has no memory pools: the process size only).",
         show=memory),
    View(flags=("--autolinks",), help="Show auto-links.", show=autolinks),
    View(flags=("--linkroutes",), help="Show link routes.", show=linkroutes),
    View(flags=("--tcp",), help="Show TCP bridges and the TCP connections they carry.",
         show=tcp),
    View(flags=("--log",), help="Show recent log entries.", show=log_lines, dated=False),
)


def render(output: Output, *, csv: bool) -> list[str]:
    lines: list[str] = []
    for item in output:
        if isinstance(item, Table):
            lines += render_csv(item) if csv else render_plain(item)
        else:
            lines.append(item)
    return lines


def run(view: View, client: Management, options: Options, *, csv: bool) -> list[str]:
    """The lines ``view`` prints for the router behind ``client``."""
    lines = []
    if view.dated:
        routers = client.query(PREFIX + "router", ["id"])
        lines += [f"{datetime.now(UTC).replace(tzinfo=None)} UTC",
                  str(routers[0].get("id")) if routers else "-", ""]
    return lines + render(view.show(client, options), csv=csv)


def _node_id(address: str) -> str:
    """The router id in ``amqp:/_topo/0/ID/$management``."""
    parts = address.split("/")
    return parts[3] if len(parts) > 4 else address


def network(client: ManagementClient) -> list[tuple[str, str]]:
    """Every router reachable from the connected one, as (id, management
    address): the interior routers GET-MGMT-NODES names (asked of the active
    uplink's interior when connected to an edge), each followed by the edge
    routers attached to it (docs/networks.md#edge-routers).  A standalone
    router is alone.
    """
    nodes = [str(node) for node in client.node_call("GET-MGMT-NODES") or []]
    if not nodes:
        (me,) = client.query(PREFIX + "router", ["id", "mode"]) or [{}]
        uplinks = [row["container"] for row in client.query(
            PREFIX + "connection", ["container", "role", "dir", "active"])
            if row.get("role") == "edge" and row.get("dir") == "out"
            and row.get("active") is not False]
        if me.get("mode") != "edge" or not uplinks:
            return [(str(me.get("id", "-")), "$management")]
        client.retarget(f"_topo/0/{uplinks[0]}/$management")
        nodes = [str(node) for node in client.node_call("GET-MGMT-NODES") or []]
    routers: list[tuple[str, str]] = []
    for node in nodes:
        address = node.removeprefix("amqp:/")
        routers.append((_node_id(node), address))
        client.retarget(address)
        routers += [(str(row["container"]), f"_edge/{row['container']}/$management")
                    for row in client.query(PREFIX + "connection", ["container", "role", "dir"])
                    if row.get("role") == "edge" and row.get("dir") == "in"]
    return routers


def run_all(view: View, client: ManagementClient, options: Options, *,
            csv: bool) -> tuple[list[str], bool]:
    """``--all-routers``: ``view`` for every router of the network, edges
    included, each under a ``Router ID`` heading as qdstat prints them; a
    router that does not answer gets a line saying so and the rest are still
    shown.  Returns the lines and whether every router answered."""
    lines = [f"{datetime.now(UTC).replace(tzinfo=None)} UTC"]
    answered = True
    for router_id, address in network(client):
        lines += [f"Router {router_id}", ""]
        try:
            client.retarget(address)
            lines += render(view.show(client, options), csv=csv)
        except ToolError as exc:
            lines.append(f"hopstat: {exc}")
            answered = False
        lines.append("")
    return lines, answered


def _view_options(command: Callable[..., None]) -> Callable[..., None]:
    for view in reversed(VIEWS):
        command = click.option(*view.flags, view.dest, is_flag=True, help=view.help)(command)
    return command


@click.command(context_settings={"help_option_names": ["-h", "--help"]},
               epilog="Exit status: 0 on success, 1 when the router cannot be reached or "
                      "refuses a request, 2 for bad options.")
@_view_options
@click.option("-r", "--router", "router_id", metavar="ROUTER-ID",
              help="Router to be queried, through the one connected to "
                   "(default: the router connected to).")
@click.option("-d", "--edge-router", "edge_id", metavar="EDGE-ROUTER-ID",
              help="Edge router to be queried, through the interior connected to.")
@click.option("--all-routers", is_flag=True,
              help="Show the view for every router of the network, the edge routers "
                   "attached to each interior included.")
@click.option("--limit", type=click.IntRange(min=0), metavar="N",
              help="Limit the number of output rows (0 or not given: unlimited).")
@click.option("--csv", "csv_format", is_flag=True,
              help="Render tables as comma-separated values.")
@click.option("-v", "--verbose", is_flag=True, help="Show maximum detail.")
@click.option("-b", "--bus", default=DEFAULT_URL, metavar="URL",
              help=f"URL of the router to connect to; host:port is accepted "
                   f"(default {DEFAULT_URL}).")
@click.option("-t", "--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True),
              default=DEFAULT_TIMEOUT_S, metavar="SECS",
              help=f"Maximum time to wait for the connection and for each response, "
                   f"in seconds (default {DEFAULT_TIMEOUT_S:g}).")
@click.version_option(router.__version__, prog_name="hopstat")
def hopstat(router_id: str | None, edge_id: str | None, all_routers: bool, limit: int | None,
            csv_format: bool, verbose: bool, bus: str, timeout_s: float,
            **shown: bool) -> None:
    """Show the status of a running Hop router (or qdrouterd), as qdstat does.

    Choose at most one display option; without one, -g is shown.
    """
    chosen = [v for v in VIEWS if shown.get(v.dest)]
    if len(chosen) > 1:
        names = " and ".join("/".join(v.flags) for v in chosen)
        raise click.UsageError(f"{names} cannot be used together")
    view = chosen[0] if chosen else VIEWS[0]
    if all_routers and (router_id or edge_id):
        raise click.UsageError("--all-routers cannot be used with -r/--router or "
                               "-d/--edge-router")
    options = Options(limit=limit or None, verbose=verbose)
    answered = True
    try:
        with ManagementClient(bus, router=router_id, edge=edge_id,
                              timeout_s=timeout_s) as client:
            if all_routers:
                lines, answered = run_all(view, client, options, csv=csv_format)
            else:
                lines = run(view, client, options, csv=csv_format)
    except ToolError as exc:
        click.echo(f"hopstat: {exc}", err=True)
        sys.exit(1)
    click.echo("\n".join(lines))
    if not answered:
        sys.exit(1)


def main() -> None:
    """The ``hopstat`` console script."""
    hopstat(prog_name="hopstat")


if __name__ == "__main__":
    main()
