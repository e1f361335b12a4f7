"""From untyped sections to a ``RouterConf``: names, types, and the rules across sections.

Owns reference section 2.5 as Hop applies it: unknown sections and
attributes, deprecated names, mandatory attributes, singletons, unique
names, router mode against connection roles, references between sections
(sslProfile, saslPlugin, exchangeName), and turning the domain specs'
errors into positioned diagnostics.  Hop is stricter than qdrouterd here:
semantic errors in address, linkRoute and autoLink sections are errors,
not warnings.  Every problem is recorded; none stops the others from being
found.  It must not read files or know the syntax a section came from.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from typing import TypeVar

import attrs

from addressing import AddressError
from autolink import AutoLinkError
from conf.connections import ConnectorSection, ListenerSection, Role
from conf.diagnostics import DiagnosticSink, Position
from conf.document import RawSection
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
    PolicySection,
    RouterMode,
    RouterSection,
    SslProfileSection,
    VhostSection,
)
from conf.types import ValueTypeError
from linkroute import LinkRouteError

__all__ = ["build_conf"]

log = logging.getLogger(__name__)

_UNSUPPORTED_SECTIONS = {
    "console": "section 'console' is deprecated in qdrouterd and not supported by hop",
}


@attrs.frozen(kw_only=True)
class _Typed:
    """A typed section with the positions of its header and of each attribute's key."""

    section: Section
    pos: Position
    key_pos: dict[str, Position]

    def at(self, conf_name: str) -> Position:
        return self.key_pos.get(conf_name, self.pos)


def _type_section(entity: EntityType, raw: RawSection, sink: DiagnosticSink) -> _Typed | None:
    fields = schema_fields(entity.cls)
    by_name = {f.schema.conf_name: f for f in fields}
    by_name.update({alias: f for f in fields for alias in f.schema.aliases})
    section = entity.conf_name
    values: dict[str, object] = {}
    written: dict[str, tuple[str, Position]] = {}
    key_pos: dict[str, Position] = {}
    ok = True
    for attribute in raw.attributes:
        key = camel_case(attribute.key)
        field = by_name.get(key)
        if field is None:
            ok = False
            if key == "identity":
                message = f"attribute 'identity' cannot be set in section {section!r}"
            else:
                hint = did_you_mean(key, [f.schema.conf_name for f in fields])
                message = f"unknown attribute {attribute.key!r} in section {section!r}{hint}"
            sink.error(attribute.key_pos, message)
            continue
        conf_name = field.schema.conf_name
        previous = written.get(conf_name)
        if previous is not None:
            ok = False
            if previous[0] != key:
                old, new = (key, previous[0]) if key != conf_name else (previous[0], key)
                sink.error(
                    attribute.key_pos,
                    f"both {old!r} and {new!r} given in section {section!r} "
                    f"({old!r} is the deprecated name of {new!r}; keep one)",
                )
            else:
                sink.error(
                    attribute.key_pos,
                    f"attribute {conf_name!r} given twice in section {section!r} "
                    f"(first at {previous[1]})",
                )
            continue
        written[conf_name] = (key, attribute.key_pos)
        key_pos[conf_name] = attribute.key_pos
        if key != conf_name:
            log.warning(
                "%s:%s: attribute %r of section %r is deprecated; use %r",
                sink.filename,
                attribute.key_pos,
                key,
                section,
                conf_name,
            )
        try:
            values[field.field.name] = field.schema.type.convert(attribute.value)
        except ValueTypeError as error:
            ok = False
            sink.error(
                error.pos or attribute.value.pos,
                f"invalid value for {conf_name!r} in section {section!r}: {error.message}",
            )
    if raw.damaged:
        # The missing line may hold what the checks below would miss.
        return None
    for field in fields:
        if field.required and field.schema.conf_name not in written:
            ok = False
            sink.error(
                raw.pos,
                f"missing mandatory attribute {field.schema.conf_name!r} in section {section!r}",
            )
    if not ok:
        return None
    typed = _Typed(section=entity.cls(**values), pos=raw.pos, key_pos=key_pos)
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
    fields = {f.schema.conf_name: f.field.name for f in schema_fields(entity.cls)}
    for conf_name in entity.unique:
        first: dict[object, Position] = {}
        for item in typed:
            value = getattr(item.section, fields[conf_name])
            if value is None:
                continue
            if value in first:
                shown = getattr(value, "value", value)
                sink.error(
                    item.at(conf_name),
                    f"duplicate {conf_name} {shown!r} in section {entity.conf_name!r} "
                    f"(first used at {first[value]})",
                )
            else:
                first[value] = item.at(conf_name)


def _check_roles(mode: RouterMode, typed: list[_Typed], sink: DiagnosticSink) -> None:
    for item in typed:
        section = item.section
        assert isinstance(section, ListenerSection | ConnectorSection)
        kind = "listener" if isinstance(section, ListenerSection) else "connector"
        role = section.role
        message = None
        if mode is RouterMode.STANDALONE and role in (Role.INTER_ROUTER, Role.EDGE):
            message = (
                f"role {role.value!r} is not allowed with router mode 'standalone': "
                "a standalone router does not connect to or accept connections from other routers"
            )
        elif role is Role.INTER_ROUTER and mode is not RouterMode.INTERIOR:
            message = (
                f"role 'inter-router' is only allowed with router mode 'interior', "
                f"not {mode.value!r}"
            )
        elif role is Role.EDGE and mode is RouterMode.EDGE and kind == "listener":
            message = "a listener with role 'edge' is only allowed with router mode 'interior'"
        if message is not None:
            sink.error(item.at("role"), f"{kind}: {message}")


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
    named = [item.key_pos[n] for n in re.findall(r"'(\w+)'", str(error)) if n in item.key_pos]
    sink.error(max(named) if named else item.pos, f"invalid {section!r} section: {error}")


_S = TypeVar("_S", bound=Section)


def _sections(items: list[_Typed], cls: type[_S]) -> tuple[_S, ...]:
    result = []
    for item in items:
        assert isinstance(item.section, cls)
        result.append(item.section)
    return tuple(result)


_R = TypeVar("_R", AddressSection, LinkRouteSection, AutoLinkSection)


def _specs(items: list[_Typed], section: str, cls: type[_R], sink: DiagnosticSink) -> list[_R]:
    """The sections whose domain spec builds; the others' errors go to ``sink``."""
    good = []
    for item in items:
        assert isinstance(item.section, cls)
        try:
            item.section.to_spec()
        except (AddressError, LinkRouteError, AutoLinkError) as error:
            _spec_error(item, section, error, sink)
        else:
            good.append(item.section)
    return good


def build_conf(raw_sections: list[RawSection], sink: DiagnosticSink) -> RouterConf | None:
    """Type and check ``raw_sections``, recording every problem in ``sink``.

    Returns:
        The configuration, or None when any problem was recorded.
    """
    typed: dict[str, list[_Typed]] = defaultdict(list)
    for raw in raw_sections:
        name = camel_case(raw.name)
        entity = ENTITY_TYPES_BY_NAME.get(name)
        if entity is None:
            message = _UNSUPPORTED_SECTIONS.get(name) or (
                f"unknown section {raw.name!r}{did_you_mean(name, ENTITY_TYPES_BY_NAME)}"
            )
            sink.error(raw.pos, message)
            continue
        item = _type_section(entity, raw, sink)
        if item is not None:
            typed[entity.conf_name].append(item)
    for entity in ENTITY_TYPES:
        _check_unique(entity, typed[entity.conf_name], sink)
    routers = typed["router"]
    if routers or not any(camel_case(raw.name) == "router" for raw in raw_sections):
        router = routers[0].section if routers else RouterSection()
        assert isinstance(router, RouterSection)
        _check_roles(router.mode, typed["listener"] + typed["connector"], sink)
    ssl = typed["sslProfile"]
    _check_references(typed["listener"] + typed["connector"], "sslProfile", ssl, "sslProfile", sink)
    _check_references(typed["authServicePlugin"], "sslProfile", ssl, "sslProfile", sink)
    plugins = typed["authServicePlugin"]
    _check_references(typed["listener"], "saslPlugin", plugins, "authServicePlugin", sink)
    _check_references(typed["binding"], "exchangeName", typed["exchange"], "exchange", sink)
    addresses = _specs(typed["address"], "address", AddressSection, sink)
    link_routes = _specs(typed["linkRoute"], "linkRoute", LinkRouteSection, sink)
    auto_links = _specs(typed["autoLink"], "autoLink", AutoLinkSection, sink)
    if len(sink):
        return None
    routers_ = _sections(typed["router"], RouterSection)
    policies = _sections(typed["policy"], PolicySection)
    return RouterConf(
        router=routers_[0] if routers_ else RouterSection(),
        listeners=_sections(typed["listener"], ListenerSection),
        connectors=_sections(typed["connector"], ConnectorSection),
        ssl_profiles=_sections(typed["sslProfile"], SslProfileSection),
        addresses=tuple(section.to_spec() for section in addresses),
        link_routes=tuple(section.to_spec() for section in link_routes),
        auto_links=tuple(section.to_spec() for section in auto_links),
        logs=_sections(typed["log"], LogSection),
        policy=policies[0] if policies else PolicySection(),
        vhosts=_sections(typed["vhost"], VhostSection),
        auth_service_plugins=_sections(typed["authServicePlugin"], AuthServicePluginSection),
        exchanges=_sections(typed["exchange"], ExchangeSection),
        bindings=_sections(typed["binding"], BindingSection),
    )
