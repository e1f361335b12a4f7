"""Message logging's line: the fields named, in qdrouterd's form
(docs/operations.md#message-logging)."""

from __future__ import annotations

from proton import Message, symbol

from router.adapter.forwarding.message_log import FIELDS, describe


def message() -> Message:
    msg = Message(body=["Hello", "X" * 100_000])
    msg.id = "123455"
    msg.user_id = b"testuser"
    msg.address = "orders"
    msg.subject = "test-subject"
    msg.reply_to = "hello_world"
    msg.correlation_id = 89
    msg.content_type = "text/html; charset=utf-8"
    msg.content_encoding = "gzip, deflate"
    msg.creation_time = 1487772623.883
    msg.group_id = "group1"
    msg.reply_to_group_id = "group0"
    msg.properties = {"app-property": [10, 20, 30], "some-other": symbol("O_one"),
                      "raw": b"\x01z", "flag": True}
    return msg


def test_all_fields_in_order_strings_quoted_symbols_and_binaries_marked() -> None:
    assert describe(message().encode(), FIELDS) == (
        'Message{message-id="123455", user-id=b"testuser", to="orders", '
        'subject="test-subject", reply-to="hello_world", correlation-id=89, '
        'content-type=:"text/html; charset=utf-8", content-encoding=:"gzip, deflate", '
        'creation-time="2017-02-22 14:10:23.883 +0000", group-id="group1", '
        'group-sequence=0, reply-to-group-id="group0", '
        'app-properties={"app-property"=[10, 20, 30], "some-other"=:"O_one", '
        '"raw"=b"\\x01z", "flag"=true}}')


def test_only_the_fields_named_and_only_those_the_message_has() -> None:
    encoded = message().encode()
    assert describe(encoded, ("reply-to", "user-id", "subject")) == \
        'Message{user-id=b"testuser", subject="test-subject", reply-to="hello_world"}'
    plain = Message(body="x")
    plain.address = "q"
    assert describe(plain.encode(), FIELDS) == 'Message{to="q"}'
    assert describe(encoded, ()) == "Message{}"


def test_what_cannot_be_read_shows_what_was_read() -> None:
    encoded = message().encode()
    assert describe(b"\x00Ss\xd0garbage", FIELDS) == "Message{}"
    cut = encoded[:encoded.index(b"app-property") - 4]  # inside application-properties
    assert describe(cut, ("to", "app-properties")) == 'Message{to="orders"}'
