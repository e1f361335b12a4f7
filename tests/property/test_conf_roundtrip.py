"""Property: ``parse(render(conf)) == conf`` for any valid RouterConf.

Section strategies are derived from the schema metadata, so a new attribute
is covered without touching this file; only the strings a check restricts
and the rules across sections (unique names, role against mode, references,
the domain specs' own rules) are handled by hand.
"""

from __future__ import annotations

import string
from typing import Any, TypeVar

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from addressing import AddressError, AddressTable, BindingSpec, ExchangeSpec, ExchangeTable
from autolink import AutoLinkError
from conf import (
    LOG_LEVELS,
    AddressSection,
    AuthServicePluginSection,
    AutoLinkSection,
    BindingSection,
    ConnectorSection,
    ConsoleSection,
    ExchangeSection,
    LinkRouteSection,
    ListenerSection,
    LogSection,
    PolicySection,
    Role,
    RouterConf,
    RouterMode,
    RouterSection,
    SslProfileSection,
    TcpConnectorSection,
    TcpListenerSection,
    UserGroupSection,
    VhostSection,
    parse,
    render,
)
from conf.fields import Section, schema_fields
from conf.types import (
    BooleanType,
    EnumType,
    FloatType,
    IntegerType,
    JsonMapType,
    NameListType,
    PortType,
    StringType,
    TcpPortType,
    ValueType,
)
from linkroute import LinkRouteError

S = TypeVar("S", bound=Section)

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
property_keys = st.text(
    string.ascii_letters + string.digits + "-_.:", min_size=1, max_size=10
).filter(
    lambda key: (
        key not in {"product", "version", "port", "scheme", "hostname", "network-host"}
        and not key.startswith(("qd.", "x-opt-qd."))
    )
)
log_enables = st.just("none") | st.lists(
    st.sampled_from([*LOG_LEVELS, *(level + "+" for level in LOG_LEVELS)]), min_size=1, max_size=3
).map(", ".join)
router_ids = st.text(
    st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp")),
    min_size=1,
    max_size=20,
)
token_text = st.text(min_size=1, max_size=10).filter(
    lambda text: bool(text.replace(".", "").replace("/", ""))
)

SPECIAL_STRINGS: dict[str, st.SearchStrategy[str]] = {
    "id": router_ids,
    "enable": log_enables,
    "protocols": st.lists(
        st.sampled_from(["TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"]), min_size=1, max_size=3
    ).map(" ".join),
    "uidFormat": st.text("csloun125", min_size=1, max_size=4),
    "messageLoggingComponents": st.sampled_from(["all", "none", "to,subject", "message-id"]),
    "prefix": token_text,
    "pattern": token_text,
    "failoverUrls": st.sampled_from(["127.0.0.1:5673", "amqp://h1:5672, h2", "amqps://[::1]"]),
}


def value_strategy(conf_name: str, value_type: ValueType) -> st.SearchStrategy[Any]:
    if isinstance(value_type, StringType):
        return SPECIAL_STRINGS.get(conf_name, st.text(max_size=12))
    if isinstance(value_type, IntegerType):  # a value below its floor reads back raised
        return st.integers(value_type.floor or value_type.minimum, value_type.maximum)
    if isinstance(value_type, BooleanType):
        return st.booleans()
    if isinstance(value_type, FloatType):
        return st.floats(value_type.minimum, value_type.maximum, allow_nan=False)
    if isinstance(value_type, EnumType):
        return st.sampled_from(list(value_type.enum_type))
    if isinstance(value_type, PortType):
        return st.sampled_from(["amqp", "amqps"]) | st.integers(value_type.minimum, 65535).map(str)
    if isinstance(value_type, TcpPortType):
        return st.integers(value_type.minimum, 65535).map(str)
    if isinstance(value_type, NameListType):
        return st.lists(st.text(max_size=6), max_size=3).map(tuple)
    assert isinstance(value_type, JsonMapType)
    if conf_name == "groups":
        return st.dictionaries(st.text(max_size=6), user_groups(), max_size=2)
    return st.dictionaries(property_keys, json_values, max_size=3)


def user_groups() -> st.SearchStrategy[dict[str, Any]]:
    """A group as a vhost's ``groups`` holds it: any of its declared settings,
    each written as the JSON form writes it (names also as one string)."""
    settings: dict[str, st.SearchStrategy[Any]] = {}
    for field in schema_fields(UserGroupSection):
        value_type = field.schema.type
        written = value_strategy(field.schema.conf_name, value_type).map(value_type.plain)
        if isinstance(value_type, NameListType):
            written = written | st.lists(st.text(max_size=6), max_size=3)
        settings[field.schema.conf_name] = written
    return st.fixed_dictionaries({}, optional=settings).map(_one_form_of_each_list)


def _one_form_of_each_list(group: dict[str, Any]) -> dict[str, Any]:
    """A group gives sources or sourcePattern, targets or targetPattern."""
    for names, patterns in (("sources", "sourcePattern"), ("targets", "targetPattern")):
        if names in group:
            group.pop(patterns, None)
    return group


def sections(cls: type[S], **overrides: st.SearchStrategy[Any]) -> st.SearchStrategy[S]:
    """Sections of ``cls`` with every attribute drawn from its schema type."""
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for field in schema_fields(cls):
        strategy = value_strategy(field.schema.conf_name, field.schema.type)
        if field.required:
            fields[field.field.name] = strategy
        else:
            fields[field.field.name] = st.just(field.default) | strategy
    fields.update(overrides)
    return st.builds(cls, **fields)


names = st.none() | st.text(max_size=8)


def allowed(role: Role, mode: RouterMode, listener: bool) -> bool:
    if mode is RouterMode.STANDALONE:
        return role not in (Role.INTER_ROUTER, Role.EDGE)
    if role is Role.INTER_ROUTER:
        return mode is RouterMode.INTERIOR
    return not (role is Role.EDGE and mode is RouterMode.EDGE and listener)


C = TypeVar("C", ListenerSection, ConnectorSection)


def fix_connection(section: C, mode: RouterMode, ssl_names: list[str]) -> C:
    """Make a listener or connector agree with the router mode and the sslProfiles."""
    role = section.role
    if not allowed(role, mode, isinstance(section, ListenerSection)):
        role = Role.NORMAL
    properties = None if role in (Role.INTER_ROUTER, Role.EDGE) else section.open_properties
    profile = section.ssl_profile if section.ssl_profile in ssl_names else None
    return attrs.evolve(section, role=role, open_properties=properties, ssl_profile=profile)


def valid_specs(items: list[Any]) -> list[Any]:
    specs = []
    for item in items:
        if getattr(item, "container_id", None) is not None and getattr(item, "connection", None):
            item = attrs.evolve(item, connection=None)
        if isinstance(item, AddressSection) and item.enable_fallback:
            item = attrs.evolve(item, enable_fallback=False)
        try:
            specs.append(item.to_spec())
        except (AddressError, LinkRouteError, AutoLinkError):
            continue
    return specs


def valid_exchanges(exchanges: list[ExchangeSection], bindings: list[BindingSection]
                    ) -> tuple[list[ExchangeSpec], list[BindingSpec]]:
    """The exchanges and bindings a router takes together (a file may not
    repeat an address, bind a key badly for its method, or loop)."""
    table = ExchangeTable()
    kept_exchanges: list[ExchangeSpec] = []
    kept_bindings: list[BindingSpec] = []
    for n, section in enumerate(exchanges):
        try:
            spec = section.to_spec()
            table.add_exchange(spec, str(n))
        except AddressError:
            continue
        kept_exchanges.append(spec)
    for n, binding_section in enumerate(bindings):
        try:
            binding = binding_section.to_spec()
            table.add_binding(binding, str(n))
        except AddressError:
            continue
        kept_bindings.append(binding)
    return kept_exchanges, kept_bindings


def distinct_addresses(specs: list[Any]) -> list[Any]:
    """Addresses with a prefix or pattern of their own: a file that repeats
    one is read back without the repeat (skipped with a warning, as
    qdrouterd; tests/unit/conf/test_errors.py), so it does not round-trip."""
    table = AddressTable()
    kept = []
    for spec in specs:
        try:
            table.add(spec)
        except AddressError:
            continue
        kept.append(spec)
    return kept


def prefix_xor_pattern(cls: type[S], **overrides: st.SearchStrategy[Any]) -> st.SearchStrategy[S]:
    with_prefix = sections(cls, prefix=token_text, pattern=st.none(), **overrides)
    with_pattern = sections(cls, prefix=st.none(), pattern=token_text, **overrides)
    return with_prefix | with_pattern


def unique_names(cls: type[S], max_size: int, **overrides: Any) -> st.SearchStrategy[list[S]]:
    """Up to ``max_size`` sections whose names differ (or are all absent)."""
    strategy = sections(cls, **{"name": names, **overrides})
    return st.lists(strategy, max_size=max_size, unique_by=lambda s: getattr(s, "name", None))


ROUTERS = sections(RouterSection)
SSL_PROFILES = unique_names(SslProfileSection, 1)
LISTENERS = unique_names(ListenerSection, 2)
CONNECTORS = unique_names(ConnectorSection, 1)
EXCHANGES = unique_names(ExchangeSection, 1, name=st.text(min_size=1, max_size=6))
BINDINGS = st.lists(sections(BindingSection), max_size=1)
LOGS = st.lists(sections(LogSection), max_size=2, unique_by=(lambda s: s.module, lambda s: s.name))
VHOSTS = st.lists(
    sections(VhostSection), max_size=2, unique_by=(lambda s: s.hostname, lambda s: s.name)
)
ADDRESSES = st.lists(
    prefix_xor_pattern(AddressSection, name=names), max_size=2, unique_by=lambda s: s.name
)
LINK_ROUTES = st.lists(prefix_xor_pattern(LinkRouteSection, name=names), max_size=1)
AUTO_LINKS = st.lists(sections(AutoLinkSection, name=names), max_size=1)
PLUGINS = st.lists(sections(AuthServicePluginSection, ssl_profile=st.none(),
                            host=st.sampled_from(["auth", "127.0.0.1"])), max_size=1)
POLICIES = sections(PolicySection)
CONSOLES = st.lists(sections(ConsoleSection), max_size=1)
TCP_ADDRESSES = st.text(min_size=1, max_size=8)
TCP_LISTENERS = st.lists(sections(TcpListenerSection, address=TCP_ADDRESSES), max_size=2,
                         unique_by=lambda s: s.name)
TCP_CONNECTORS = st.lists(
    sections(TcpConnectorSection, address=TCP_ADDRESSES, host=st.text(min_size=1, max_size=8)),
    max_size=2, unique_by=lambda s: s.name)


def fix_tcp_listener(section: TcpListenerSection, ssl_names: list[str]) -> TcpListenerSection:
    """An sslProfile that names a profile of the conf, or none (and then
    no authenticatePeer)."""
    profile = section.ssl_profile if section.ssl_profile in ssl_names else None
    return attrs.evolve(section, ssl_profile=profile,
                        authenticate_peer=section.authenticate_peer and profile is not None)


def fix_tcp_connector(section: TcpConnectorSection,
                      ssl_names: list[str]) -> TcpConnectorSection:
    profile = section.ssl_profile if section.ssl_profile in ssl_names else None
    return attrs.evolve(section, ssl_profile=profile)


@st.composite
def router_confs(draw: st.DrawFn) -> RouterConf:
    router = draw(ROUTERS)
    ssl_profiles = draw(SSL_PROFILES)
    ssl_names = [p.name for p in ssl_profiles if p.name is not None]
    exchanges = draw(EXCHANGES)
    exchange_names = [e.name for e in exchanges if e.name is not None]
    bindings = [
        attrs.evolve(binding, exchange_name=draw(st.sampled_from(exchange_names)))
        for binding in (draw(BINDINGS) if exchange_names else [])
    ]
    exchange_specs, binding_specs = valid_exchanges(exchanges, bindings)
    return RouterConf(
        router=router,
        listeners=tuple(
            attrs.evolve(fix_connection(s, router.mode, ssl_names), sasl_plugin=None)
            for s in draw(LISTENERS)
        ),
        connectors=tuple(fix_connection(s, router.mode, ssl_names) for s in draw(CONNECTORS)),
        ssl_profiles=tuple(ssl_profiles),
        auth_service_plugins=tuple(draw(PLUGINS)),
        addresses=tuple(distinct_addresses(valid_specs(draw(ADDRESSES)))),
        link_routes=tuple(valid_specs(draw(LINK_ROUTES))),
        auto_links=tuple(valid_specs(draw(AUTO_LINKS))),
        logs=tuple(draw(LOGS)),
        policy=draw(POLICIES),
        vhosts=tuple(draw(VHOSTS)),
        exchanges=tuple(exchange_specs),
        bindings=tuple(binding_specs),
        consoles=tuple(draw(CONSOLES)),
        tcp_listeners=tuple(fix_tcp_listener(s, ssl_names) for s in draw(TCP_LISTENERS)),
        tcp_connectors=tuple(fix_tcp_connector(s, ssl_names) for s in draw(TCP_CONNECTORS)),
    )


@settings(max_examples=200, deadline=None)
@given(router_confs())
def test_parse_of_render_is_identity(conf: RouterConf) -> None:
    assert parse(render(conf), "rendered.conf") == conf
