"""From untyped sections to a ``RouterConf``: names, types, and the rules across sections.

Owns the checks of docs/operations.md#checks as Hop applies them: unknown sections and
attributes, deprecated names, mandatory attributes, singletons, unique
names, router mode against connection roles, references between sections
(sslProfile, saslPlugin, exchangeName), and turning the domain specs'
errors into positioned diagnostics.  Hop is stricter than qdrouterd here:
semantic errors in address, linkRoute and autoLink sections are errors,
not warnings.  Every problem is recorded; none stops the others from being
found.  It must not read files or know the syntax a section came from.
"""

from __future__ import annotations

import functools
import logging
import re
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Final, TypeVar

import attrs

from addressing import (
    AddressError,
    AddressSpec,
    AddressTable,
    BindingSpec,
    ExchangeSpec,
    ExchangeTable,
)
from autolink import AutoLinkError, AutoLinkSpec
from conf.connections import ConnectorSection, ListenerSection, Role
from conf.diagnostics import FILE_POSITION, DiagnosticSink, Position
from conf.document import Node, RawAttribute, RawSection, from_plain
from conf.entities import ENTITY_TYPES, ENTITY_TYPES_BY_NAME, EntityType
from conf.fields import Section, schema_fields
from conf.logs import LogSection
from conf.model import RouterConf
from conf.names import camel_case, did_you_mean, snake_case
from conf.routing import (
    AddressSection,
    AutoLinkSection,
    BindingSection,
    ExchangeSection,
    LinkRouteSection,
)
from conf.sections import (
    AuthServicePluginSection,
    ConsoleSection,
    DiscoverySection,
    PolicySection,
    RouterMode,
    RouterSection,
    SslProfileSection,
    VhostSection,
)
from conf.tcp import TcpConnectorSection, TcpListenerSection
from conf.types import ValueTypeError
from linkroute import LinkRouteError, LinkRouteSpec

__all__ = ["build_conf", "build_section", "section_attributes"]

log = logging.getLogger(__name__)


@attrs.frozen(kw_only=True)
class _Typed:
    """A typed section with the position of its header and its attributes by conf name."""

    section: Section
    pos: Position
    attributes: dict[str, RawAttribute]

    def at(self, conf_name: str) -> Position:
        attribute = self.attributes.get(conf_name)
        return self.pos if attribute is None else attribute.key_position


@attrs.frozen(kw_only=True)
class _Field:
    """What typing one attribute needs."""

    conf_name: str
    #: The name of the section class's field.
    name: str
    convert: Callable[[Node], object]
    warnings: Callable[[Node], list[tuple[Position, str]]]
    ignored: str | None


@attrs.frozen(kw_only=True)
class _Schema:
    """The attributes of one section class as lookup tables, built once at import.

    A large file has thousands of sections: this spares walking the schema for each.
    """

    #: By conf name and by deprecated alias.
    by_name: Mapping[str, _Field]
    #: Field names by conf name.
    names: Mapping[str, str]
    conf_names: tuple[str, ...]
    required: tuple[str, ...]


def _schema_of(cls: type[Section]) -> _Schema:
    fields = schema_fields(cls)
    by_name: dict[str, _Field] = {}
    for f in fields:
        conf_name = f.schema.conf_name
        field = _Field(conf_name=conf_name, name=f.field.name, convert=f.schema.type.convert,
                       warnings=f.schema.type.warnings, ignored=f.schema.ignored)
        by_name.update(dict.fromkeys((conf_name, *f.schema.aliases), field))
    return _Schema(
        by_name=by_name,
        names={f.schema.conf_name: f.field.name for f in fields},
        conf_names=tuple(f.schema.conf_name for f in fields),
        required=tuple(f.schema.conf_name for f in fields if f.required),
    )


_SCHEMAS = {entity.conf_name: _schema_of(entity.cls) for entity in ENTITY_TYPES}


# Large files write the same few names thousands of times.
_normalised = functools.lru_cache(maxsize=1024)(camel_case)


def _type_section(entity: EntityType, raw: RawSection, sink: DiagnosticSink) -> _Typed | None:
    schema = _SCHEMAS[entity.conf_name]
    by_name = schema.by_name
    section = entity.conf_name
    values: dict[str, object] = {}
    given: dict[str, RawAttribute] = {}  # by conf name
    ok = True
    for attribute in raw.attributes:
        key = _normalised(attribute.key)
        field = by_name.get(key)
        if field is None:
            ok = False
            if key == "identity":
                message = f"attribute 'identity' cannot be set in section {section!r}"
            else:
                hint = did_you_mean(key, schema.conf_names)
                message = f"unknown attribute {attribute.key!r} in section {section!r}{hint}"
            sink.error(attribute.key_position, message)
            continue
        conf_name = field.conf_name
        previous = given.get(conf_name)
        if previous is not None:
            ok = False
            previous_key = _normalised(previous.key)
            if previous_key != key:
                old, new = (key, previous_key) if key != conf_name else (previous_key, key)
                sink.error(
                    attribute.key_position,
                    f"both {old!r} and {new!r} given in section {section!r} "
                    f"({old!r} is the deprecated name of {new!r}; keep one)",
                )
            else:
                sink.error(
                    attribute.key_position,
                    f"attribute {conf_name!r} given twice in section {section!r} "
                    f"(first at {previous.key_position})",
                )
            continue
        given[conf_name] = attribute
        ignored = field.ignored
        if ignored is not None and entity.ignored is None:
            log.warning("%s:%s: attribute %r of section %r is accepted and ignored: %s",
                        sink.filename, attribute.key_position, conf_name, section, ignored)
        if key != conf_name:
            log.warning(
                "%s:%s: attribute %r of section %r is deprecated; use %r",
                sink.filename,
                attribute.key_position,
                key,
                section,
                conf_name,
            )
        try:
            values[field.name] = field.convert(attribute.value)
            for pos, message in field.warnings(attribute.value):
                log.warning("%s:%s: %s", sink.filename, attribute.at(pos), message)
        except ValueTypeError as error:
            ok = False
            sink.error(
                attribute.at(error.pos or attribute.value.pos),
                f"invalid value for {conf_name!r} in section {section!r}: {error.message}",
            )
    if raw.damaged:
        # The missing line may hold what the checks below would miss.
        return None
    for conf_name in schema.required:
        if conf_name not in given:
            ok = False
            sink.error(raw.pos, f"missing mandatory attribute {conf_name!r} in section {section!r}")
    if not ok:
        return None
    typed = _Typed(section=entity.cls(**values), pos=raw.pos, attributes=given)
    for blamed, message in typed.section.problems():
        sink.error(typed.at(blamed) if blamed else raw.pos, f"section {section!r}: {message}")
    return typed


def _check_unique(entity: EntityType, typed: list[_Typed], sink: DiagnosticSink) -> None:
    if entity.singleton:
        for extra in typed[1:]:
            sink.error(
                extra.pos,
                f"duplicate {entity.conf_name!r} section: only one is allowed "
                f"(the first is at {typed[0].pos})",
            )
    names = _SCHEMAS[entity.conf_name].names
    for conf_name in entity.unique:
        first: dict[object, _Typed] = {}
        for item in typed:
            value = getattr(item.section, names[conf_name])
            if value is None:
                continue
            if value in first:
                shown = getattr(value, "value", value)
                sink.error(
                    item.at(conf_name),
                    f"duplicate {conf_name} {shown!r} in section {entity.conf_name!r} "
                    f"(first used at {first[value].at(conf_name)})",
                )
            else:
                first[value] = item


def role_problem(mode: RouterMode, section: ListenerSection | ConnectorSection) -> str | None:
    """Why a listener's or connector's role does not fit the router's mode,
    or None: checked in a file and for a management CREATE alike.  The
    reason starts with qdrouterd's own words, which clients match."""
    kind = "listener" if isinstance(section, ListenerSection) else "connector"
    role = section.role
    if mode is RouterMode.STANDALONE and role in (Role.INTER_ROUTER, Role.EDGE):
        return (f"role='standalone' not allowed to connect to or accept connections from "
                f"other routers. (a {kind} with role {role.value!r} on a standalone router)")
    if role is Role.INTER_ROUTER and mode is not RouterMode.INTERIOR:
        return (f"role='inter-router' only allowed with router mode='interior' (a {kind} "
                f"on a router in mode {mode.value!r})")
    if role is Role.EDGE and mode is RouterMode.EDGE and kind == "listener":
        return ("role='edge' only allowed with router mode='interior' (a listener with role "
                "'edge' on an edge router: edges connect to interiors)")
    return None


def _check_roles(mode: RouterMode, typed: list[_Typed], sink: DiagnosticSink) -> None:
    for item in typed:
        section = item.section
        assert isinstance(section, ListenerSection | ConnectorSection)
        message = role_problem(mode, section)
        if message is not None:
            sink.error(item.at("role"), message)


def _check_references(
    typed: list[_Typed],
    attribute: str,
    targets: list[_Typed],
    target_type: str,
    sink: DiagnosticSink,
) -> None:
    """Check that ``attribute`` of each section names a ``target_type`` section."""
    names = [getattr(t.section, "name", None) for t in targets]
    known = {n for n in names if n is not None}
    field = snake_case(attribute)
    for item in typed:
        value = getattr(item.section, field)
        if value is not None and value not in known:
            sink.error(
                item.at(attribute),
                f"{attribute} {value!r} names no {target_type} section{did_you_mean(value, known)}",
            )


def _spec_error(item: _Typed, section: str, error: Exception, sink: DiagnosticSink) -> None:
    """Blame the latest-written attribute the domain error names, else the section header."""
    named = [item.at(n) for n in re.findall(r"'(\w+)'", str(error)) if n in item.attributes]
    sink.error(max(named) if named else item.pos, f"invalid {section!r} section: {error}")


_S = TypeVar("_S", bound=Section)


def _sections(items: list[_Typed], cls: type[_S]) -> tuple[_S, ...]:
    result = []
    for item in items:
        assert isinstance(item.section, cls)
        result.append(item.section)
    return tuple(result)


_R = TypeVar("_R", AddressSection, LinkRouteSection, AutoLinkSection)
_P = TypeVar("_P", AddressSpec, LinkRouteSpec, AutoLinkSpec)


def _specs(
    items: list[_Typed], section: str, cls: type[_R], spec_cls: type[_P], sink: DiagnosticSink
) -> tuple[_P, ...]:
    """The domain specs of the sections that build; the others' errors go to ``sink``."""
    good = []
    for item in items:
        assert isinstance(item.section, cls)
        try:
            spec = item.section.to_spec()
        except (AddressError, LinkRouteError, AutoLinkError) as error:
            _spec_error(item, section, error, sink)
        else:
            assert isinstance(spec, spec_cls)
            good.append(spec)
    return tuple(good)


def _distinct(items: list[_Typed], specs: tuple[AddressSpec, ...],
              sink: DiagnosticSink) -> tuple[AddressSpec, ...]:
    """The address specs but those whose prefix or pattern an earlier one
    already gives: each is skipped with a warning at its position, as
    qdrouterd logs the CREATE it refuses and goes on."""
    if len(specs) != len(items):
        return specs  # some did not build: the file is refused anyway
    table = AddressTable()
    kept = []
    for item, spec in zip(items, specs, strict=True):
        try:
            table.add(spec)
        except AddressError as error:
            log.warning("%s:%s: address section ignored, as qdrouterd ignores it: %s",
                        sink.filename, item.pos, error)
            continue
        kept.append(spec)
    return tuple(kept)


#: The attribute each of the exchange table's refusals is about, by the
#: start of its message (``addressing.ExchangeTable``), so that the error
#: points at it.
_EXCHANGE_BLAME: Final = (
    ("duplicate exchange name", "name"), ("duplicate exchange address", "address"),
    ("its alternate", "alternateAddress"), ("binding key", "bindingKey"),
    ("the binding", "nextHopAddress"),
)


def _exchange_error(item: _Typed, section: str, error: AddressError,
                    sink: DiagnosticSink) -> None:
    text = str(error)
    if " binds key " in text:
        blamed = "bindingKey"
    elif " has a binding named " in text:
        blamed = "name"
    else:
        blamed = next((name for start, name in _EXCHANGE_BLAME if text.startswith(start)), "")
    sink.error(item.at(blamed), f"invalid {section!r} section: {text}")


def _exchanges(exchange_items: list[_Typed], binding_items: list[_Typed],
               sink: DiagnosticSink) -> tuple[tuple[ExchangeSpec, ...], tuple[BindingSpec, ...]]:
    """The exchanges and bindings, checked together as the router will make
    them (docs/routing.md#exchanges): a duplicate address, a binding of a
    key and next hop given twice, a key the exchange's method refuses or a
    circle of exchanges is an error at its section."""
    table = ExchangeTable()
    exchanges: list[ExchangeSpec] = []
    for n, item in enumerate(exchange_items):
        assert isinstance(item.section, ExchangeSection)
        try:
            spec = item.section.to_spec()
            table.add_exchange(spec, str(n))
        except AddressError as error:
            _exchange_error(item, "exchange", error, sink)
        else:
            exchanges.append(spec)
    bindings: list[BindingSpec] = []
    for n, item in enumerate(binding_items):
        assert isinstance(item.section, BindingSection)
        try:
            binding = item.section.to_spec()
            if binding.exchange_name in table.exchanges:  # else named by the reference check
                table.add_binding(binding, str(n))
        except AddressError as error:
            _exchange_error(item, "binding", error, sink)
        else:
            bindings.append(binding)
    return tuple(exchanges), tuple(bindings)


def build_conf(raw_sections: list[RawSection], sink: DiagnosticSink) -> RouterConf | None:
    """Type and check ``raw_sections``, recording every problem in ``sink``.

    Returns:
        The configuration, or None when any problem was recorded.
    """
    typed: dict[str, list[_Typed]] = defaultdict(list)
    for raw in raw_sections:
        name = _normalised(raw.name)
        entity = ENTITY_TYPES_BY_NAME.get(name)
        if entity is None:
            hint = did_you_mean(name, ENTITY_TYPES_BY_NAME)
            sink.error(raw.pos, f"unknown section {raw.name!r}{hint}")
            continue
        if entity.ignored is not None:
            log.warning("%s:%s: section %r is accepted and ignored: %s",
                        sink.filename, raw.pos, entity.conf_name, entity.ignored)
        item = _type_section(entity, raw, sink)
        if item is not None:
            typed[entity.conf_name].append(item)
    for entity in ENTITY_TYPES:
        _check_unique(entity, typed[entity.conf_name], sink)
    routers = typed["router"]
    if routers or not any(_normalised(raw.name) == "router" for raw in raw_sections):
        router = routers[0].section if routers else RouterSection()
        assert isinstance(router, RouterSection)
        _check_roles(router.mode, typed["listener"] + typed["connector"], sink)
    ssl = typed["sslProfile"]
    _check_references(typed["listener"] + typed["connector"] + typed["tcpListener"]
                      + typed["tcpConnector"], "sslProfile", ssl, "sslProfile", sink)
    _check_references(typed["authServicePlugin"], "sslProfile", ssl, "sslProfile", sink)
    plugins = typed["authServicePlugin"]
    _check_references(typed["listener"], "saslPlugin", plugins, "authServicePlugin", sink)
    _check_references(typed["binding"], "exchangeName", typed["exchange"], "exchange", sink)
    addresses = _distinct(typed["address"],
                          _specs(typed["address"], "address", AddressSection, AddressSpec, sink),
                          sink)
    link_routes = _specs(typed["linkRoute"], "linkRoute", LinkRouteSection, LinkRouteSpec, sink)
    auto_links = _specs(typed["autoLink"], "autoLink", AutoLinkSection, AutoLinkSpec, sink)
    exchanges, bindings = _exchanges(typed["exchange"], typed["binding"], sink)
    if len(sink):
        return None
    routers_ = _sections(typed["router"], RouterSection)
    policies = _sections(typed["policy"], PolicySection)
    return RouterConf(
        router=routers_[0] if routers_ else RouterSection(),
        listeners=_sections(typed["listener"], ListenerSection),
        connectors=_sections(typed["connector"], ConnectorSection),
        ssl_profiles=_sections(typed["sslProfile"], SslProfileSection),
        addresses=addresses,
        link_routes=link_routes,
        auto_links=auto_links,
        logs=_sections(typed["log"], LogSection),
        policy=policies[0] if policies else PolicySection(),
        vhosts=_sections(typed["vhost"], VhostSection),
        auth_service_plugins=_sections(typed["authServicePlugin"], AuthServicePluginSection),
        exchanges=exchanges,
        bindings=bindings,
        tcp_listeners=_sections(typed["tcpListener"], TcpListenerSection),
        tcp_connectors=_sections(typed["tcpConnector"], TcpConnectorSection),
        consoles=_sections(typed["console"], ConsoleSection),
        discovery=next(iter(_sections(typed["discovery"], DiscoverySection)), None),
    )


def build_section(conf_name: str, attributes: Mapping[str, object]) -> Section:
    """Type and check one section given as a map of attribute values
    (management CREATE), with the same rules as a file's sections.

    Raises:
        ConfError: every problem found; the diagnostics have no position.
        KeyError: ``conf_name`` is not a section type.
    """
    entity = ENTITY_TYPES_BY_NAME[conf_name]
    raw = RawSection(
        name=conf_name,
        pos=FILE_POSITION,
        attributes=tuple(
            RawAttribute(key=key, key_pos=FILE_POSITION, value=from_plain(value, FILE_POSITION))
            for key, value in attributes.items()
        ),
    )
    sink = DiagnosticSink("")
    item = _type_section(entity, raw, sink)
    sink.raise_if_any()
    assert item is not None
    return item.section


def section_attributes(section: Section) -> dict[str, object]:
    """A section's attributes by conf name, as management shows them."""
    return {
        f.schema.conf_name: f.schema.type.plain(getattr(section, f.field.name))
        for f in schema_fields(type(section))
    }
