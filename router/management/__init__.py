"""Management: qdrouterd's AMQP management protocol over Hop's state
(docs/operations.md#management).

Pure: requests in, responses out.  The agent and the schema know nothing of
sockets or proton; the adapter delivers requests, routes responses and
supplies the sources of the entities it owns (connections, listeners...).
"""

from router.management.agent import (
    STATUS_TEXT,
    Agent,
    Changed,
    EntitySource,
    ManagementError,
    ReadOnly,
    Request,
    Requester,
    Response,
    Row,
)
from router.management.messages import decode_request, encode_response
from router.management.schema import PREFIX, SCHEMA, Attribute, EntityType, Schema
from router.management.sources import (
    ConfigAddresses,
    ConfigAutoLinks,
    ConfigBindings,
    ConfigExchanges,
    ConfigLinkRoutes,
    ConnectionLinkRoutes,
    RouterAddresses,
    RouterLinks,
    RouterNodes,
    SslProfiles,
    SslProfileStore,
    link_row,
)

__all__ = [
    "PREFIX",
    "SCHEMA",
    "STATUS_TEXT",
    "Agent",
    "Attribute",
    "Changed",
    "ConfigAddresses",
    "ConfigAutoLinks",
    "ConfigBindings",
    "ConfigExchanges",
    "ConfigLinkRoutes",
    "ConnectionLinkRoutes",
    "EntitySource",
    "EntityType",
    "ManagementError",
    "ReadOnly",
    "Request",
    "Requester",
    "Response",
    "RouterAddresses",
    "RouterLinks",
    "RouterNodes",
    "Row",
    "Schema",
    "SslProfileStore",
    "SslProfiles",
    "decode_request",
    "encode_response",
    "link_row",
]
