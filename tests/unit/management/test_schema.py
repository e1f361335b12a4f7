"""GET-SCHEMA: the types whose attributes the conf declares describe them as
the conf does, the settings of a vhost's user groups among them."""

from __future__ import annotations

from typing import Any

import conf
from conf.fields import schema_fields
from router.management import PREFIX, Agent, Request

GROUP_TYPE = "vhostUserGroupSettings"  # keyed by short names, as qdrouterd's schema


def schema() -> Any:
    response = Agent({}).handle(Request(
        properties={"operation": "GET-SCHEMA", "type": "org.amqp.management", "name": "self"},
        body=None, reply_to="reply"))
    assert response.status == 200
    return response.body


def test_get_schema_describes_the_user_group_settings_as_the_conf_declares_them() -> None:
    groups = schema()["entityTypes"][GROUP_TYPE]
    assert groups["fullyQualifiedType"] == PREFIX + GROUP_TYPE
    assert groups["extends"] == PREFIX + "configurationEntity"
    assert "operations" not in groups, "read with their vhost, never as rows of their own"
    attributes = groups["attributes"]
    declared = schema_fields(conf.UserGroupSection)
    assert list(attributes) == [field.schema.conf_name for field in declared]
    for field in declared:
        described = attributes[field.schema.conf_name]
        assert described["description"] == field.schema.doc
        assert described.get("default") == field.schema.type.plain(field.default)
    assert attributes["maxSenders"] == {
        "type": "integer", "description": "sending links per connection; 0: no limit",
        "default": 2147483647, "create": True}
    assert attributes["management"]["type"] == ["none", "read", "write"]
    assert "default" not in attributes["management"], "unset: as qdrouterd"
    assert attributes["allowDynamicSource"]["default"] is False
    assert "default" not in attributes["sources"], "unset: any address"


def test_the_vhost_s_groups_attribute_is_a_map() -> None:
    vhost = schema()["entityTypes"]["vhost"]["attributes"]
    assert vhost["groups"]["type"] == "map" and vhost["groups"]["update"] is True
