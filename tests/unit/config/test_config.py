"""The YAML configuration: documented defaults, `--set` overrides, and errors that name the key
and never carry a secret."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from binlake.config.secrets import source_password
from binlake.config.settings import Config, load_config, parse_config
from binlake.errors import BinlakeError, ConfigError

MINIMAL: dict[str, Any] = {"source": {"database": "shop"}}


def config_error(raw: dict[str, Any], overrides: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, overrides)
    return str(caught.value)


def test_defaults_of_a_minimal_config() -> None:
    config = parse_config(MINIMAL)
    assert (config.source.host, config.source.port, config.source.user) == (
        "127.0.0.1",
        3306,
        "binlake",
    )
    assert config.source.password_env == "BINLAKE_SOURCE_PASSWORD"
    assert config.source.password is None
    assert config.source.database == "shop"
    assert config.source.tables is None
    assert config.source.server_id_range == (5400, 5499)
    assert config.snapshot.chunk_size == 8096
    assert config.snapshot.parallelism == 4
    assert config.snapshot.split_keys == {}
    assert config.snapshot.distribution_factor_upper == 1000.0
    assert config.snapshot.distribution_factor_lower == 0.05
    assert config.snapshot.commit_batch == 124  # ceil(1,000,000 rows / 8,096 rows per chunk)
    assert config.lake.root == "./lakehouse"
    assert config.stream.startup_mode == "initial"
    assert config.stream.trigger_interval == "5s"
    assert config.stream.trigger_seconds == 5.0


def test_server_ids_stream_takes_the_last_readers_take_from_the_first() -> None:
    config = parse_config({"source": {"database": "shop", "server_id_range": [100, 104]}})
    assert config.stream_server_id == 104
    assert [config.snapshot_server_id(i) for i in range(4)] == [100, 101, 102, 103]


@pytest.mark.parametrize(
    ("server_ids", "parallelism", "concurrent_tables", "slots"),
    [
        ((5400, 5499), 4, 4, 4),  # the defaults: 99 readers' ids hold 24 slots of 4
        ((100, 104), 4, 4, 1),  # exactly parallelism + the stream: one table at a time
        ((100, 108), 4, 4, 2),  # 8 readers' ids: two slots, never a third sharing ids
        ((100, 107), 4, 4, 1),  # 7 readers' ids: a second slot would reuse the first's
        ((100, 140), 2, 30, 20),
    ],
)
def test_tables_at_once_never_share_a_server_id(
    server_ids: tuple[int, int], parallelism: int, concurrent_tables: int, slots: int
) -> None:
    config = parse_config(
        {
            "source": {"database": "shop", "server_id_range": list(server_ids)},
            "snapshot": {"parallelism": parallelism, "concurrent_tables": concurrent_tables},
        }
    )
    assert config.table_slots == slots
    ids = [
        config.snapshot_server_id(slot * parallelism + task)
        for slot in range(slots)
        for task in range(parallelism)
    ]
    assert len(set(ids)) == len(ids)
    assert max(ids) < config.stream_server_id
    # A batch's reads take the ids above the snapshot's slots, the stream's own first.
    reads = config.stream_read_ids
    assert reads[0] == config.stream_server_id and len(set(reads)) == len(reads) >= 1
    assert not set(reads) & set(ids)
    assert all(server_ids[0] <= i <= server_ids[1] for i in reads)


@pytest.mark.parametrize(
    ("server_ids", "read_tasks", "reads"),
    [
        ((5400, 5499), 4, (5499, 5498, 5497, 5496)),  # the defaults
        ((100, 108), 4, (108,)),  # two slots of 4 leave no id: batches are read whole
        ((100, 110), 4, (110, 109, 108)),  # two ids left beside the stream's
        ((5400, 5499), 1, (5499,)),
    ],
)
def test_a_batchs_reads_take_the_ids_the_snapshot_leaves_free(
    server_ids: tuple[int, int], read_tasks: int, reads: tuple[int, ...]
) -> None:
    config = parse_config(
        {
            "source": {"database": "shop", "server_id_range": list(server_ids)},
            "stream": {"read_tasks": read_tasks},
        }
    )
    assert config.stream_read_ids == reads


def test_full_design_example_parses() -> None:
    config = parse_config(
        {
            "source": {
                "host": "db1",
                "port": 3307,
                "user": "cdc",
                "password_env": "SHOP_PW",
                "database": "shop",
                "tables": ["customers", "orders_.*"],
                "server_id_range": [5400, 5499],
            },
            "snapshot": {"chunk_size": 100, "parallelism": 2, "split_keys": {"audit_log": "id"}},
            "lake": {"root": "/tmp/lake"},
            "stream": {"startup_mode": "latest-offset", "trigger_interval": "500ms"},
        }
    )
    assert config.source.tables == ["customers", "orders_.*"]
    assert config.snapshot.split_keys == {"audit_log": "id"}
    assert config.snapshot.commit_batch == 10_000  # ceil(1,000,000 rows / 100 rows per chunk)
    assert config.stream.trigger_seconds == 0.5


def test_overrides_set_dotted_keys_with_yaml_typing() -> None:
    config = parse_config(
        MINIMAL,
        {
            "snapshot.chunk_size": "100",
            "snapshot.parallelism": "2",
            "source.tables": "[customers, orders]",
            "source.port": "3307",
            "source.server_id_range": "[10, 20]",
            "lake.root": "/tmp/lake",
            "stream.trigger_interval": "1m",
        },
    )
    assert config.snapshot.chunk_size == 100
    assert config.snapshot.parallelism == 2
    assert config.source.tables == ["customers", "orders"]
    assert config.source.port == 3307
    assert config.source.server_id_range == (10, 20)
    assert config.lake.root == "/tmp/lake"
    assert config.stream.trigger_seconds == 60.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [("5400-5499", (5400, 5499)), (" 10 - 20 ", (10, 20)), ("[10, 20]", (10, 20))],
)
def test_server_id_range_takes_flink_cdcs_dashed_form(text: str, expected: tuple[int, int]) -> None:
    config = parse_config(MINIMAL, {"source.server_id_range": text})
    assert config.source.server_id_range == expected


def test_a_single_server_id_is_a_range_of_one_and_then_too_small() -> None:
    raw = {"source": {"database": "shop", "server_id_range": 7}, "snapshot": {"parallelism": 1}}
    assert "holds 1 ids" in config_error(raw)
    raw["source"]["server_id_range"] = "7-8"
    assert parse_config(raw).source.server_id_range == (7, 8)


@pytest.mark.parametrize("text", ["5400..5499", "5400-", "-5", "a-b", "5400-5499-5600"])
def test_a_malformed_dashed_range_is_named(text: str) -> None:
    message = config_error({"source": {"database": "shop", "server_id_range": text}})
    assert "source.server_id_range" in message
    assert "LOW-HIGH like 5400-5499" in message


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("customers, orders_.*", ["customers", "orders_.*"]),
        ("customers", ["customers"]),
        (["customers", "orders"], ["customers", "orders"]),
    ],
)
def test_tables_take_a_comma_list_as_well_as_a_yaml_list(
    value: object, expected: list[str]
) -> None:
    config = parse_config({"source": {"database": "shop", "tables": value}})
    assert config.source.tables == expected


def test_tables_comma_list_through_an_override_as_a_job_parameter_gives_it() -> None:
    assert parse_config(MINIMAL, {"source.tables": "a,b"}).source.tables == ["a", "b"]
    assert parse_config(MINIMAL, {"source.tables": ""}).source.tables is None


def test_overrides_win_over_the_file_and_keep_its_other_keys() -> None:
    raw = {"source": {"database": "shop", "host": "db1"}, "snapshot": {"chunk_size": 10}}
    config = parse_config(raw, {"source.host": "db2"})
    assert config.source.host == "db2"
    assert config.source.database == "shop"
    assert config.snapshot.chunk_size == 10


def test_overrides_alone_can_supply_a_whole_config() -> None:
    config = parse_config({}, {"source.database": "shop"})
    assert config.source.database == "shop"


def test_overrides_do_not_mutate_the_callers_mapping() -> None:
    raw = {"source": {"database": "shop"}}
    parse_config(raw, {"source.host": "db2", "lake.root": "/x"})
    assert raw == {"source": {"database": "shop"}}


def test_override_value_that_is_not_valid_yaml_is_taken_as_text() -> None:
    config = parse_config(MINIMAL, {"source.user": "cdc: [x"})
    assert config.source.user == "cdc: [x"


def test_override_without_a_dot_is_rejected() -> None:
    with pytest.raises(ConfigError, match=r"'chunk_size'.*dotted key"):
        parse_config(MINIMAL, {"chunk_size": "10"})


def test_override_under_a_scalar_is_rejected() -> None:
    with pytest.raises(ConfigError, match="'lake' is not a section"):
        parse_config({**MINIMAL, "lake": "nope"}, {"lake.root": "/x"})


def test_override_can_name_one_split_key_by_table() -> None:
    """BUG: `--set snapshot.split_keys.audit_log=id` (how a bundle job parameter would set a
    split key for one table) is rejected as 'snapshot.split_keys.audit_log: Extra inputs are not
    permitted': overrides only go two levels deep, so the key becomes the literal field name
    'split_keys.audit_log'."""
    config = parse_config(MINIMAL, {"snapshot.split_keys.audit_log": "id"})
    assert config.snapshot.split_keys == {"audit_log": "id"}


def test_unknown_key_is_rejected_naming_the_key() -> None:
    message = config_error({"source": {"database": "shop", "hots": "db1"}})
    assert "source.hots: unknown key (did you mean 'host'?)" in message


def test_unknown_section_is_rejected_naming_it() -> None:
    message = config_error({**MINIMAL, "sink": {"x": 1}})
    assert "sink:" in message


def test_unknown_override_key_is_rejected_naming_the_key() -> None:
    message = config_error(MINIMAL, {"snapshot.chunksize": "10"})
    assert "snapshot.chunksize" in message


def test_missing_source_database_is_rejected() -> None:
    message = config_error({"source": {"host": "db1"}})
    assert "source.database is required, unless source.tables lists the db.table" in message


def test_missing_source_section_is_rejected() -> None:
    assert "source: Field required" in config_error({})


def test_wrongly_typed_value_names_the_key() -> None:
    message = config_error(MINIMAL, {"snapshot.chunk_size": "many"})
    assert "snapshot.chunk_size" in message


def test_zero_chunk_size_is_rejected() -> None:
    assert "snapshot.chunk_size" in config_error(MINIMAL, {"snapshot.chunk_size": "0"})


def test_server_id_range_smaller_than_parallelism_plus_stream_is_rejected() -> None:
    raw = {
        "source": {"database": "shop", "server_id_range": [1, 4]},
        "snapshot": {"parallelism": 4},
    }
    message = config_error(raw)
    assert "source.server_id_range [1, 4] holds 4 ids" in message
    assert "snapshot.parallelism 4 plus the stream need 5" in message


def test_server_id_range_of_exactly_parallelism_plus_one_is_enough() -> None:
    raw = {
        "source": {"database": "shop", "server_id_range": [1, 5]},
        "snapshot": {"parallelism": 4},
    }
    assert parse_config(raw).source.server_id_range == (1, 5)


def test_reversed_server_id_range_is_rejected() -> None:
    message = config_error({"source": {"database": "shop", "server_id_range": [5499, 5400]}})
    assert "source.server_id_range" in message
    assert "[5499, 5400]" in message


def test_server_id_zero_is_rejected() -> None:
    # server_id 0 means "not a replica": the primary refuses the binlog dump.
    assert "source.server_id_range" in config_error(
        {"source": {"database": "shop", "server_id_range": [0, 10]}}
    )


@pytest.mark.parametrize(
    ("text", "seconds"), [("5s", 5.0), ("500ms", 0.5), ("2m", 120.0), ("1h", 3600.0), ("7", 7.0)]
)
def test_trigger_interval_units(text: str, seconds: float) -> None:
    config = parse_config(MINIMAL, {"stream.trigger_interval": f"'{text}'"})
    assert config.stream.trigger_seconds == seconds


@pytest.mark.parametrize("text", ["fast", "5 sec", "-5s", "5d", ""])
def test_bad_trigger_interval_is_rejected(text: str) -> None:
    message = config_error({**MINIMAL, "stream": {"trigger_interval": text}})
    assert "stream.trigger_interval" in message
    assert repr(text) in message


def test_specific_offset_without_file_and_pos_is_rejected() -> None:
    message = config_error({**MINIMAL, "stream": {"startup_mode": "specific-offset"}})
    assert "specific-offset needs startup_file and startup_pos" in message


def test_specific_offset_with_file_but_no_pos_is_rejected() -> None:
    stream = {"startup_mode": "specific-offset", "startup_file": "mysql-bin.000003"}
    assert "startup_pos" in config_error({**MINIMAL, "stream": stream})


def test_specific_offset_with_file_and_pos_is_accepted() -> None:
    stream = {
        "startup_mode": "specific-offset",
        "startup_file": "mysql-bin.000003",
        "startup_pos": 154,
    }
    config = parse_config({**MINIMAL, "stream": stream})
    assert (config.stream.startup_file, config.stream.startup_pos) == ("mysql-bin.000003", 154)


def test_specific_offset_with_a_file_name_that_is_no_binlog_name_is_rejected() -> None:
    """BUG: the config accepts a startup_file without a numeric suffix and a negative
    startup_pos; BinlogOffset refuses both later with a bare ValueError (not a ConfigError, so
    the CLI shows a traceback instead of naming stream.startup_file)."""
    stream = {"startup_mode": "specific-offset", "startup_file": "mysql-bin", "startup_pos": -4}
    message = config_error({**MINIMAL, "stream": stream})
    assert "stream.startup_file" in message


def test_timestamp_mode_needs_a_timestamp() -> None:
    assert "startup_timestamp" in config_error({**MINIMAL, "stream": {"startup_mode": "timestamp"}})


def test_timestamp_mode_parses_an_iso_timestamp() -> None:
    stream = {"startup_mode": "timestamp", "startup_timestamp": "2024-05-01T12:00:00"}
    config = parse_config({**MINIMAL, "stream": stream})
    assert config.stream.startup_timestamp == datetime(2024, 5, 1, 12, 0, 0)


def test_unknown_startup_mode_is_rejected() -> None:
    assert "stream.startup_mode" in config_error(
        {**MINIMAL, "stream": {"startup_mode": "earliest"}}
    )


def test_config_errors_belong_to_the_binlake_error_family() -> None:
    assert issubclass(ConfigError, BinlakeError)


# -- secrets ---------------------------------------------------------------------------------


def test_password_is_read_from_the_named_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SHOP_PW", "s3cret-from-env")
    config = parse_config({"source": {"database": "shop", "password_env": "SHOP_PW"}})
    assert source_password(config.source) == "s3cret-from-env"


def test_unset_password_env_is_a_config_error_without_any_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SHOP_PW", raising=False)
    monkeypatch.setenv("BINLAKE_SOURCE_PASSWORD", "default-var-secret")
    config = parse_config({"source": {"database": "shop", "password_env": "SHOP_PW"}})
    with pytest.raises(ConfigError) as caught:
        source_password(config.source)
    message = str(caught.value)
    assert "'SHOP_PW'" in message
    assert "not set" in message
    assert "default-var-secret" not in message


def test_inline_password_wins_and_is_never_printed() -> None:
    config = parse_config({"source": {"database": "shop", "password": "hunter2-inline"}})
    assert source_password(config.source) == "hunter2-inline"
    assert "hunter2-inline" not in repr(config)
    assert "hunter2-inline" not in str(config)


def test_validation_error_does_not_echo_the_inline_password() -> None:
    raw = {"source": {"database": "shop", "password": "hunter2-inline", "hots": "x"}}
    assert "hunter2-inline" not in config_error(raw)


def test_wrongly_typed_password_is_not_echoed() -> None:
    raw = {"source": {"database": "shop", "password": ["hunter2-inline"]}}
    message = config_error(raw)
    assert "source.password" in message
    assert "hunter2-inline" not in message


# -- files -----------------------------------------------------------------------------------


def test_load_config_reads_a_yaml_file(tmp_path: Path) -> None:
    path = tmp_path / "binlake.yml"
    path.write_text(
        "source:\n  database: shop\n  tables: [customers]\nsnapshot:\n  chunk_size: 50\n"
    )
    config = load_config(path, {"snapshot.parallelism": "1"})
    assert isinstance(config, Config)
    assert config.source.tables == ["customers"]
    assert config.snapshot.chunk_size == 50
    assert config.snapshot.parallelism == 1


def test_missing_config_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "absent.yml"
    with pytest.raises(ConfigError, match=r"absent\.yml.*does not exist"):
        load_config(path)


def test_malformed_yaml_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.yml"
    path.write_text("source:\n  database: [shop\n")
    with pytest.raises(ConfigError, match=r"broken\.yml.*not valid YAML"):
        load_config(path)


def test_yaml_file_holding_a_list_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "list.yml"
    path.write_text("- source\n- lake\n")
    with pytest.raises(ConfigError, match="mapping at the top level"):
        load_config(path)


def test_empty_yaml_file_asks_for_the_source(tmp_path: Path) -> None:
    path = tmp_path / "empty.yml"
    path.write_text("")
    with pytest.raises(ConfigError, match="source: Field required"):
        load_config(path)


def test_config_path_that_is_a_directory_is_a_config_error(tmp_path: Path) -> None:
    """BUG: only FileNotFoundError is translated; a directory (or an unreadable file) escapes as
    IsADirectoryError/PermissionError instead of a ConfigError naming the path."""
    with pytest.raises(ConfigError, match="config file"):
        load_config(tmp_path)


def test_malformed_yaml_error_does_not_echo_the_password_line(tmp_path: Path) -> None:
    """BUG: a password that YAML cannot scan (here one starting with '@', a reserved indicator)
    makes PyYAML's error quote the offending line, and load_config puts that text into the
    ConfigError: the password is printed."""
    path = tmp_path / "secret.yml"
    path.write_text("source:\n  database: shop\n  password: @hunter2-inline\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert "hunter2-inline" not in str(caught.value)


@pytest.mark.parametrize("reference", ["binlake", "binlake/", "/key", "a/b/c", "my scope/key"])
def test_a_password_secret_must_be_scope_slash_key(reference: str) -> None:
    with pytest.raises(ConfigError, match=r"password_secret.*must be <scope>/<key>"):
        parse_config({"source": {"database": "shop", "password_secret": reference}})


def test_a_password_secret_is_kept_as_its_reference() -> None:
    config = parse_config({"source": {"database": "shop", "password_secret": "binlake/pw"}})
    assert config.source.password_secret == "binlake/pw"


def test_silver_deletes_are_hard_unless_soft_is_asked_for() -> None:
    assert parse_config({"source": {"database": "shop"}}).silver.deletes == "hard"
    soft = parse_config({"source": {"database": "shop"}, "silver": {"deletes": "soft"}})
    assert soft.silver.deletes == "soft"
    with pytest.raises(ConfigError, match=r"silver\.deletes"):
        parse_config({"source": {"database": "shop"}, "silver": {"deletes": "archive"}})


def test_gtid_startup_needs_a_mariadb_gtid_position_or_a_mysql_gtid_set() -> None:
    assert "gtid needs startup_gtid" in config_error(
        {**MINIMAL, "stream": {"startup_mode": "gtid"}}
    )
    for wrong in ["0-1", "0-1-100,", "a-b-c", "1-2-3-4"]:
        stream = {"startup_mode": "gtid", "startup_gtid": wrong}
        message = config_error({**MINIMAL, "stream": stream})
        assert "MariaDB GTID position" in message and repr(wrong) in message
    uuid = "3E11FA47-71CA-11E1-9E33-C80AA9429562"
    for wrong in [f"{uuid}:5-1", f"{uuid}:", "3e11fa47:1-5", f"{uuid}:1-5,0-1-100"]:
        stream = {"startup_mode": "gtid", "startup_gtid": wrong}
        message = config_error({**MINIMAL, "stream": stream})
        assert "expected a MySQL GTID set" in message and repr(wrong) in message
    for given, kept in [
        ("0-1-100,1-2-7", "0-1-100,1-2-7"),
        (f"{uuid}:1-5:7", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7"),  # as the server prints
        (f"{uuid}:1-5,\n{uuid.lower()}:tag_1:3", f"{uuid.lower()}:1-5:tag_1:3"),
    ]:
        stream = {"startup_mode": "gtid", "startup_gtid": given}
        assert parse_config({**MINIMAL, "stream": stream}).stream.startup_gtid == kept


def test_silver_history_per_table_by_name_or_regex_wins_over_the_default() -> None:
    silver = parse_config(
        {
            "source": {"database": "shop"},
            "silver": {"history": "scd2", "history_tables": {"audit_.*": "latest", "x": "scd2"}},
        }
    ).silver
    assert silver.history_of("shop.customers") == "scd2"
    assert silver.history_of("shop.audit_2026") == "latest"
    assert silver.history_of("shop.audit") == "scd2"  # a regex matches the whole name
    assert parse_config({"source": {"database": "shop"}}).silver.history_of("shop.x") == "latest"


@pytest.mark.parametrize("empty", ["", None])
def test_an_empty_history_tables_parameter_is_no_per_table_history(empty: Any) -> None:
    config = parse_config({"source": {"database": "shop"}}, {"silver.history_tables": empty or ""})
    assert config.silver.history_tables == {}


def test_an_unknown_history_is_refused_with_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"silver.history: .*'latest' or 'scd2'"):
        parse_config({"source": {"database": "shop"}, "silver": {"history": "scd3"}})


def test_table_layout_properties_are_text_and_an_empty_parameter_is_no_layout() -> None:
    """YAML reads `true` and `30` as a boolean and a number; Delta's properties are text."""
    config = parse_config(
        {
            "source": {"database": "shop"},
            "lake": {
                "table_layout": {
                    "orders_.*": {
                        "cluster_by": ["customer_id"],
                        "properties": {"delta.appendOnly": False, "delta.checkpointInterval": 30},
                    }
                }
            },
        }
    )
    layout = config.lake.layout_of("shop.orders_07")
    assert layout is not None and layout.cluster_by == ["customer_id"]
    assert layout.properties == {"delta.appendOnly": "false", "delta.checkpointInterval": "30"}
    assert config.lake.layout_of("shop.customers") is None
    empty = parse_config({"source": {"database": "shop"}, "lake": {"table_layout": ""}})
    assert empty.lake.table_layout == {}


def test_routes_name_their_silver_by_db_table_with_the_source_s_groups() -> None:
    config = parse_config(
        {
            "source": {"tables": [r"shop_[0-9]+\.orders", r"shop_[0-9]+\.orders_[0-9]+"]},
            "silver": {
                "routes": [
                    {"source": r"shop_(eu|us)_[0-9]+\.(orders)", "target": r"shop.\2_\1"},
                    {"source": r"orders_[0-9]+", "target": "orders"},  # a name: its own db
                ]
            },
        }
    )
    route_of = config.silver.route_of
    assert route_of("shop_eu_1.orders") == "shop.orders_eu"
    assert route_of("shop_us_22.orders") == "shop.orders_us"
    assert route_of("shop_3.orders_07") == "shop_3.orders"  # the second route, by table name
    assert route_of("shop_eu_1.orders_07") == "shop_eu_1.orders"
    assert route_of("shop_eu_1.customers") is None  # no route: its own silver
    assert route_of("shop_eux_1.orders") is None  # a regex matches all of the name, not a part


def test_a_route_with_a_bad_regex_or_target_is_refused_before_any_work() -> None:
    source = {"database": "shop"}
    bad_regex = {"source": source, "silver": {"routes": [{"source": "orders_(", "target": "o"}]}}
    assert "silver.routes.0.source: 'orders_(' is not a regular expression" in config_error(
        bad_regex
    )
    bad_target = {"source": source, "silver": {"routes": [{"source": "o", "target": "a.b.c"}]}}
    assert "silver.routes.0.target: expected a table name or db.table" in config_error(bad_target)
    assert "target: Field required" in config_error(
        {"source": source, "silver": {"routes": [{"source": "o"}]}}
    )
    missing_group = parse_config(
        {"source": source, "silver": {"routes": [{"source": "orders_[0-9]+", "target": r"\1"}]}}
    )
    with pytest.raises(ConfigError, match=r"target '\\\\1' of 'orders_\[0-9\]\+' cannot name"):
        missing_group.silver.route_of("shop.orders_1")
    assert parse_config({**MINIMAL, "silver": {"routes": ""}}).silver.routes == []
