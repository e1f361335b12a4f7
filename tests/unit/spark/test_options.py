"""Options of the amqp data source: defaults, and a clear error for each mistake."""

from __future__ import annotations

import pytest

from spark.errors import AmqpOptionError
from spark.options import DEFAULT_URL, read_settings, write_settings


def test_defaults_and_case_insensitive_names() -> None:
    s = read_settings({"address": "events", "MAXMESSAGESPERTRIGGER": "50"})
    assert s.endpoint.url == DEFAULT_URL
    assert s.endpoint.address == "events"
    assert s.max_messages_per_trigger == 50
    assert (s.credit, s.max_messages, s.idle_timeout_s, s.durable) == (1000, None, 5.0, False)
    assert s.checkpoint_location is None and s.deduplicate


@pytest.mark.parametrize(("url", "fragment"), [
    ("http://127.0.0.1:5672", "must start with amqp:// or amqps://"),
    ("amqp://:5672", "names no host"),
    ("amqp://127.0.0.1:notaport", "not a valid URL"),
    ("amqp://127.0.0.1:5672/queue", "give the address with option 'address'"),
])
def test_a_bad_url_is_named_with_what_is_wrong(url: str, fragment: str) -> None:
    with pytest.raises(AmqpOptionError, match="option 'url'") as err:
        read_settings({"url": url, "address": "a"})
    assert fragment in str(err.value)


def test_the_address_is_required_to_read_and_to_write_without_a_to_column() -> None:
    with pytest.raises(AmqpOptionError, match="option 'address' is required"):
        read_settings({"url": "amqp://127.0.0.1:5672"})
    with pytest.raises(AmqpOptionError, match="option 'address' is required"):
        write_settings({}, has_to_column=False)
    assert write_settings({}, has_to_column=True).endpoint.address is None


@pytest.mark.parametrize(("options", "fragment"), [
    ({"credit": "0"}, "option 'credit': must be at least 1, got 0"),
    ({"credit": "lots"}, "option 'credit': expected an integer, got 'lots'"),
    ({"idleTimeout": "-1"}, "option 'idleTimeout': must be more than 0 seconds"),
    ({"durable": "maybe"}, "option 'durable': expected true or false, got 'maybe'"),
    ({"adress": "x"}, "unknown option(s) 'adress'"),
])
def test_malformed_options(options: dict[str, str], fragment: str) -> None:
    with pytest.raises(AmqpOptionError) as err:
        read_settings({"address": "a", **options})
    assert fragment in str(err.value)


def test_write_settings() -> None:
    s = write_settings({"address": "out", "credit": "10", "sendTimeout": "2.5",
                        "writeId": "job-7"}, has_to_column=False)
    assert (s.credit, s.send_timeout_s, s.write_id) == (10, 2.5, "job-7")


def test_partitions_default_to_one_and_split_max_messages() -> None:
    from spark.source import shares
    assert read_settings({"address": "a"}).partitions == 1
    assert read_settings({"address": "a", "partitions": "3"}).partitions == 3
    with pytest.raises(AmqpOptionError, match="option 'partitions': must be at least 1"):
        read_settings({"address": "a", "partitions": "0"})
    assert shares(10, 3) == [4, 3, 3]
    assert shares(2, 4) == [1, 1], "a receiver with nothing to read is left out"
    assert shares(None, 2) == [None, None]
    assert sum(n or 0 for n in shares(50_001, 7)) == 50_001


def test_accept_on_journal_needs_the_checkpoint_location() -> None:
    assert not read_settings({"address": "a"}).accept_on_journal
    assert read_settings({"address": "a", "accept": "Journal",
                          "checkpointLocation": "/tmp/c"}).accept_on_journal
    with pytest.raises(AmqpOptionError, match="journal needs option 'checkpointLocation'"):
        read_settings({"address": "a", "accept": "journal"})
    with pytest.raises(AmqpOptionError, match="expected commit or journal, got 'never'"):
        read_settings({"address": "a", "accept": "never"})


def test_min_messages_per_trigger_and_its_delay() -> None:
    s = read_settings({"address": "a", "minMessagesPerTrigger": "500",
                       "maxTriggerDelay": "2.5"})
    assert (s.min_messages_per_trigger, s.max_trigger_delay_s) == (500, 2.5)
    default = read_settings({"address": "a"})
    assert (default.min_messages_per_trigger, default.max_trigger_delay_s) == (None, 900.0)
