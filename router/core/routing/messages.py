"""The inter-router control messages as frozen records (docs/networks.md#control-messages).

Owns: one record per opcode (HELLO, RA, LSR, LSU, MAU, MAR), ``LinkState``,
``Opcode``, the protocol version and area constants, and the addresses each
message is sent to.

Must not: encode or decode bytes (``codec``), validate what a peer sent
(``codec`` does, raising ``PeerProtocolError``), or hold protocol state.
Records built by our own engine are trusted as they are.

Field names follow the wire keys, except ``delete`` for the MAU key ``del``.
Every record has a short repr for logs, e.g. ``HELLO(id=A pv=1 inst=7 seen=[B])``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import ClassVar, Final

import attrs

__all__ = [
    "AREA",
    "HELLO_ADDRESS",
    "MA_ALL_ADDRESS",
    "PROTOCOL_VERSION",
    "TOPO_ALL_ADDRESS",
    "ControlMessage",
    "Hello",
    "LinkState",
    "LinkStateRequest",
    "LinkStateUpdate",
    "MobileAddressRequest",
    "MobileAddressUpdate",
    "Opcode",
    "RouterAdvertisement",
    "control_address",
]

PROTOCOL_VERSION: Final = 1
"""The highest ``pv`` understood; messages with a higher one are ignored."""

AREA: Final = "0"
"""qdrouterd's area is always ``"0"``."""

HELLO_ADDRESS: Final = "amqp:/_local/qdhello"
TOPO_ALL_ADDRESS: Final = "amqp:/_topo/0/all/qdrouter"
# qdrouterd's C mobile-sync module sends differential MAUs to this address
# without a scheme; kept as is for byte-level fidelity.
MA_ALL_ADDRESS: Final = "_topo/0/all/qdrouter.ma"


class Opcode(enum.Enum):
    """The ``opcode`` application property of a control message."""

    HELLO = "HELLO"
    RA = "RA"
    LSU = "LSU"
    LSR = "LSR"
    MAU = "MAU"
    MAR = "MAR"


def _freeze_map(peers: Mapping[str, int]) -> Mapping[str, int]:
    return MappingProxyType(dict(peers))


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


def _ints(values: Iterable[int]) -> tuple[int, ...]:
    return tuple(values)


def _optional_strings(values: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if values is None else tuple(values)


def _list(values: Iterable[object]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def _peers(peers: Mapping[str, int]) -> str:
    return "{" + ", ".join(f"{k}:{v}" for k, v in peers.items()) + "}"


@attrs.frozen(kw_only=True, repr=False)
class LinkState:
    """A router's link state: its neighbours and the cost of the link to each.

    ``ls_seq`` increases whenever the peers change.
    """

    id: str
    area: str = AREA
    ls_seq: int
    peers: Mapping[str, int] = attrs.field(factory=dict, converter=_freeze_map)

    def __repr__(self) -> str:
        return f"LS(id={self.id} ls_seq={self.ls_seq} peers={_peers(self.peers)})"


@attrs.frozen(kw_only=True, repr=False)
class Hello:
    """HELLO: sent to every neighbour each ``hello_interval_s``; ``seen`` lists
    the routers we heard a HELLO from within ``hello_max_age_s``."""

    opcode: ClassVar[Opcode] = Opcode.HELLO
    id: str
    pv: int = PROTOCOL_VERSION
    area: str = AREA
    instance: int = 0
    seen: tuple[str, ...] = attrs.field(default=(), converter=_strings)

    def __repr__(self) -> str:
        return f"HELLO(id={self.id} pv={self.pv} inst={self.instance} seen={_list(self.seen)})"


@attrs.frozen(kw_only=True, repr=False)
class RouterAdvertisement:
    """RA: flooded periodically and after local changes; carries the sender's
    current link-state and mobile-address sequence numbers."""

    opcode: ClassVar[Opcode] = Opcode.RA
    id: str
    pv: int = PROTOCOL_VERSION
    area: str = AREA
    instance: int = 0
    ls_seq: int
    mobile_seq: int

    def __repr__(self) -> str:
        return (
            f"RA(id={self.id} pv={self.pv} inst={self.instance} ls_seq={self.ls_seq} "
            f"mobile_seq={self.mobile_seq})"
        )


@attrs.frozen(kw_only=True, repr=False)
class LinkStateRequest:
    """LSR: asks the target router for its link state."""

    opcode: ClassVar[Opcode] = Opcode.LSR
    id: str
    pv: int = PROTOCOL_VERSION
    area: str = AREA

    def __repr__(self) -> str:
        return f"LSR(id={self.id} pv={self.pv})"


@attrs.frozen(kw_only=True, repr=False)
class LinkStateUpdate:
    """LSU: the sender's link state, in reply to an LSR."""

    opcode: ClassVar[Opcode] = Opcode.LSU
    id: str
    pv: int = PROTOCOL_VERSION
    area: str = AREA
    instance: int = 0
    ls_seq: int
    ls: LinkState

    def __repr__(self) -> str:
        return (
            f"LSU(id={self.id} pv={self.pv} inst={self.instance} ls_seq={self.ls_seq} "
            f"peers={_peers(self.ls.peers)})"
        )


@attrs.frozen(kw_only=True, repr=False)
class MobileAddressUpdate:
    """MAU: the sender's advertised address keys.

    Differential when ``exist`` is None (``add``/``delete``, ``hints`` one per
    added key); absolute otherwise (``exist`` lists every key, ``hints`` one
    per key, ``add``/``delete`` empty).
    """

    opcode: ClassVar[Opcode] = Opcode.MAU
    id: str
    pv: int = PROTOCOL_VERSION
    area: str = AREA
    mobile_seq: int
    add: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    delete: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    hints: tuple[int, ...] = attrs.field(default=(), converter=_ints)
    exist: tuple[str, ...] | None = attrs.field(default=None, converter=_optional_strings)

    def __repr__(self) -> str:
        if self.exist is not None:
            body = f"exist={_list(self.exist)}"
        else:
            body = f"add={_list(self.add)} del={_list(self.delete)}"
        return (
            f"MAU(id={self.id} pv={self.pv} mobile_seq={self.mobile_seq} {body} "
            f"hints={_list(self.hints)})"
        )


@attrs.frozen(kw_only=True, repr=False)
class MobileAddressRequest:
    """MAR: asks the target for an absolute MAU; ``have_seq`` is the target's
    mobile sequence as the sender knows it."""

    opcode: ClassVar[Opcode] = Opcode.MAR
    id: str
    pv: int = PROTOCOL_VERSION
    area: str = AREA
    have_seq: int

    def __repr__(self) -> str:
        return f"MAR(id={self.id} pv={self.pv} have_seq={self.have_seq})"


ControlMessage = (
    Hello
    | RouterAdvertisement
    | LinkStateRequest
    | LinkStateUpdate
    | MobileAddressUpdate
    | MobileAddressRequest
)


def control_address(opcode: Opcode, router_id: str | None) -> str:
    """The ``to`` address qdrouterd uses for a control message
    (docs/networks.md#control-messages).

    Args:
        opcode: the message's opcode.
        router_id: the target router, or None for the broadcast (RA, differential MAU).

    Returns:
        ``amqp:/_local/qdhello`` for HELLO; ``amqp:/_topo/0/all/qdrouter`` or
        ``amqp:/_topo/0/<id>/qdrouter`` for RA/LSR/LSU; ``_topo/0/all/qdrouter.ma``
        or ``amqp:/_topo/0/<id>/qdrouter.ma`` for MAU/MAR.
    """
    if opcode is Opcode.HELLO:
        return HELLO_ADDRESS
    mobile = opcode is Opcode.MAU or opcode is Opcode.MAR
    if router_id is None:
        return MA_ALL_ADDRESS if mobile else TOPO_ALL_ADDRESS
    return f"amqp:/_topo/{AREA}/{router_id}/qdrouter" + (".ma" if mobile else "")
