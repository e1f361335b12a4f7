"""Writing a ``RouterConf`` back as conf-syntax text that parses to an equal configuration.

Owns the canonical text form: sections in registry order, attributes in
schema order, only values that differ from their defaults, and quoting
(a Hop extension: a JSON string literal) for the strings the plain syntax
cannot carry.  It must not validate; a ``RouterConf`` is valid already.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence

from conf.entities import ENTITY_TYPES, EntityType
from conf.fields import SchemaField, Section, schema_fields
from conf.model import RouterConf
from conf.names import ONE_WORD_KEYS
from conf.routing import (
    AddressSection,
    AutoLinkSection,
    BindingSection,
    ExchangeSection,
    LinkRouteSection,
)
from conf.sections import PolicySection

__all__ = ["format_value", "render", "render_section"]


def _needs_quotes(text: str, one_word: bool) -> bool:
    if not text or text != text.strip() or text[0] in '"{':
        return True
    if any(unicodedata.category(char) == "Cc" for char in text):
        return True
    if one_word:
        return any(char.isspace() for char in text)
    return "#" in text


def format_value(field: SchemaField, value: object) -> str:
    """The conf-syntax text of ``value`` for the attribute ``field``."""
    text = field.schema.type.format(value)
    one_word = field.schema.conf_name in ONE_WORD_KEYS
    if not field.schema.type.writes_json and _needs_quotes(text, one_word):
        return json.dumps(text)
    return text


def render_section(entity: EntityType, section: Section) -> str:
    """One section; attributes equal to their default are left out."""
    lines = [f"{entity.conf_name} {{"]
    for field in schema_fields(type(section)):
        value = getattr(section, field.field.name)
        if not field.required and value == field.default:
            continue
        lines.append(f"    {field.schema.conf_name}: {format_value(field, value)}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _sections_by_type(conf: RouterConf) -> dict[str, Sequence[Section]]:
    return {
        "router": [conf.router],
        "listener": conf.listeners,
        "connector": conf.connectors,
        "sslProfile": conf.ssl_profiles,
        "authServicePlugin": conf.auth_service_plugins,
        "address": [AddressSection.from_spec(spec) for spec in conf.addresses],
        "linkRoute": [LinkRouteSection.from_spec(spec) for spec in conf.link_routes],
        "autoLink": [AutoLinkSection.from_spec(spec) for spec in conf.auto_links],
        "exchange": [ExchangeSection.from_spec(spec) for spec in conf.exchanges],
        "binding": [BindingSection.from_spec(spec) for spec in conf.bindings],
        "tcpListener": conf.tcp_listeners,
        "tcpConnector": conf.tcp_connectors,
        "log": conf.logs,
        "policy": [conf.policy] if conf.policy != PolicySection() else [],
        "vhost": conf.vhosts,
        "console": conf.consoles,
        "discovery": (conf.discovery,) if conf.discovery is not None else (),
    }


def render(conf: RouterConf) -> str:
    """The conf-syntax text of ``conf``; ``parse(render(conf), name) == conf``."""
    by_type = _sections_by_type(conf)
    blocks = [
        render_section(entity, section)
        for entity in ENTITY_TYPES
        for section in by_type[entity.conf_name]
    ]
    return "\n".join(blocks)
