"""Schema metadata on attrs fields: the single source of truth for every attribute.

Each section class declares its attributes as attrs fields whose metadata
(made by ``setting``) holds the conf name, deprecated aliases, value type and
a one-line description; the attrs default is the default.  The parser, the
renderer and the manual page all read this metadata.  This module must not
name any particular attribute or entity.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from conf.types import ValueType

_KEY: Final = "hop.conf"

#: A problem a section finds with itself: (conf name of the attribute to blame
#: or None for the section header, message).
Problem = tuple[str | None, str]


@attrs.frozen(kw_only=True)
class AttributeSchema:
    """What the schema knows about one attribute."""

    conf_name: str
    type: ValueType
    doc: str
    aliases: tuple[str, ...] = ()
    #: Shown in the manual instead of "none" when the attribute is unset by default.
    default_doc: str | None = None
    #: Why Hop accepts the attribute but does nothing with it (a warning is
    #: logged when a file sets it); None for attributes Hop applies.
    ignored: str | None = None


def setting(
    conf_name: str,
    type_: ValueType,
    doc: str,
    *,
    aliases: tuple[str, ...] = (),
    default_doc: str | None = None,
    ignored: str | None = None,
) -> dict[str, Any]:
    """Field metadata for ``attrs.field(metadata=...)`` describing one attribute."""
    schema = AttributeSchema(
        conf_name=conf_name,
        type=type_,
        doc=doc,
        aliases=aliases,
        default_doc=default_doc,
        ignored=ignored,
    )
    return {_KEY: schema}


@attrs.frozen(kw_only=True)
class SchemaField:
    """An attrs field of a section class together with its schema metadata."""

    field: attrs.Attribute[Any]
    schema: AttributeSchema

    @property
    def required(self) -> bool:
        """True when the attribute has no default and must be given."""
        return self.field.default is attrs.NOTHING

    @property
    def default(self) -> object:
        """The default value (None when unset by default or required)."""
        return None if self.required else self.field.default


_SCHEMA_FIELDS: dict[type, tuple[SchemaField, ...]] = {}


def schema_fields(cls: type) -> tuple[SchemaField, ...]:
    """The schema attributes of a section class, in declaration order."""
    cached = _SCHEMA_FIELDS.get(cls)
    if cached is None:
        cached = tuple(
            SchemaField(field=field, schema=field.metadata[_KEY])
            for field in attrs.fields(cls)
            if isinstance(field.metadata.get(_KEY), AttributeSchema)
        )
        _SCHEMA_FIELDS[cls] = cached
    return cached


class Section:
    """Base of the section classes: cross-attribute checks of one section."""

    def problems(self) -> list[Problem]:
        """What is wrong with this section as a whole (not with single values)."""
        return []
