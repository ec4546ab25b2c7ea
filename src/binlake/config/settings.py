"""The YAML configuration: one validated object per concern, built once at the entry point.

The key names are a contract (docs/configuration.md#every-key); bundle job parameters map onto the
same dotted keys through `overrides`. Secrets are references: `source.password_env` names an
environment variable; an inline `source.password` is accepted for local use but never printed.
The model holds validated data and pure lookups only: `config.secrets` reads the secrets it names.
"""

from __future__ import annotations

import difflib
import re
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from binlake.errors import ConfigError
from binlake.model.capture import Capture, qualified, split_qualified, table_matches
from binlake.model.gtid_sets import GtidSet, GtidSetError, is_gtid_set

_ROWS_PER_COMMIT = 1_000_000
_GTID_POSITION = re.compile(r"^\d+-\d+-\d+(,\s*\d+-\d+-\d+)*$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


#: `source.tls`: the MySQL client's `--ssl-mode`s, in order of strength.
TlsMode = Literal["disabled", "preferred", "required", "verify_ca", "verify_identity"]


class ColumnRule(_Section):
    """What lands of a table's columns (`source.column_rules`)."""

    #: Left out of the lake altogether.
    exclude: list[str] = Field(default_factory=list)
    #: Replaced by the hex SHA-256 of the salt and the value (equal values hash alike).
    hash: list[str] = Field(default_factory=list)
    #: Replaced by `****` (a NULL stays NULL): text columns.
    mask: list[str] = Field(default_factory=list)

    def ruled(self) -> list[str]:
        return [*self.exclude, *self.hash, *self.mask]


class SourceConfig(_Section):
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=1, le=65535)] = 3306
    user: str = "binlake"
    #: Name of the environment variable that holds the password (preferred).
    password_env: str | None = "BINLAKE_SOURCE_PASSWORD"
    #: Inline password, for throwaway local setups only.
    password: SecretStr | None = None
    #: A Databricks secret `<scope>/<key>` holding the password, read through the workspace's
    #: API (for serverless jobs, which take no environment variables). Wins over `password_env`.
    password_secret: str | None = None
    #: The database whose tables are captured. Unset: `tables` names `db.table`s of any
    #: database (names or regexes matching all of `db.table`), read by one binlog reader.
    database: str | None = None
    #: Table names or regular expressions (fully matched); omitted = every base table of
    #: `database`. Without `database`: `db.table` names or regexes (`shop_[0-9]+\.orders`).
    tables: list[str] | None = None
    #: Per table (name, `db.table` or a fully-matching regex of either): columns left out,
    #: hashed or masked before
    #: anything is written (`{customers: {hash: [email], exclude: [notes]}}`).
    column_rules: dict[str, ColumnRule] = Field(default_factory=dict)
    #: The environment variable holding the salt of hashed columns (never in the config).
    hash_salt_env: str | None = "BINLAKE_HASH_SALT"
    #: A Databricks secret `<scope>/<key>` holding the salt instead (serverless jobs).
    hash_salt_secret: str | None = None
    #: Per table (name, `db.table` or a regex of either): a Spark SQL predicate on its columns;
    #: only rows it holds land (bronze, the changelog, silver), `{orders: "status <> 'test'"}`.
    row_filters: dict[str, str] = Field(default_factory=dict)
    #: Replica server ids for binlog connections: the snapshot uses one per parallel reader,
    #: the stream uses the last id of the range. Two connections with one id evict each other.
    server_id_range: tuple[int, int] = (5400, 5499)
    #: Seconds to wait for the server to answer a connection (whole seconds: the drivers take an
    #: integer), so an unreachable host fails fast instead of hanging.
    connect_timeout_s: Annotated[float, Field(ge=1)] = 10.0
    #: How long a running job waits for a source that went away (a restart, a failover, killed
    #: sessions), reconnecting with backoff, before it stops; 0 stops at the first error.
    reconnect_timeout_s: Annotated[float, Field(ge=0)] = 300.0
    #: TLS to the source, with the MySQL client's modes: `preferred` uses TLS when the server
    #: offers it (unverified), `required` refuses a server without TLS, `verify_ca` also checks
    #: the certificate chain against `tls_ca` (else the system's CAs), `verify_identity` also
    #: checks that the certificate names `host`.
    tls: TlsMode = "preferred"
    #: PEM file of the CA(s) that sign the server's certificate, for the verify modes.
    tls_ca: str | None = None
    #: A client certificate and its key (PEM), for accounts that require X509.
    tls_cert: str | None = None
    tls_key: str | None = None
    #: A folder of binlog files (`mysqlbinlog --raw`, a managed service's binlog export) the
    #: stream reads instead of the server: from its oldest file, each table's schema from its
    #: table maps, no connection made (docs/sources.md#a-binlog-archive-as-the-source).
    binlog_archive: str | None = None

    #: The salt, resolved once on the driver (`config.secrets.with_hash_salt`); never dumped.
    _hash_salt: SecretStr | None = PrivateAttr(default=None)

    @field_validator("database", mode="before")
    @classmethod
    def _no_database(cls, value: Any) -> Any:
        """An empty job parameter (`--set source.database=`) is no database: several."""
        return None if value == "" else value

    @field_validator("column_rules", mode="before")
    @classmethod
    def _no_rules(cls, value: Any) -> Any:
        """An empty job parameter (`--set source.column_rules=`) is no rule."""
        return {} if value in (None, "") else value

    @property
    def capture(self) -> Capture:
        """The tables this config captures."""
        return Capture(self.database, None if self.tables is None else tuple(self.tables))

    @model_validator(mode="after")
    def _something_captured(self) -> SourceConfig:
        if self.database is None and not self.tables:
            raise ValueError(
                "source.database is required, unless source.tables lists the db.table names or "
                "patterns to capture over several databases (e.g. shop_[0-9]+\\.orders)"
            )
        return self

    def column_rule_of(self, table: str) -> ColumnRule | None:
        """The column rules of `table` ("db.table"); None: every column lands as it is."""
        return next((r for p, r in self.column_rules.items() if table_matches(p, table)), None)

    @property
    def hashes(self) -> bool:
        """Whether a column rule hashes columns (only then is a salt needed)."""
        return any(rule.hash for rule in self.column_rules.values())

    @property
    def carried_hash_salt(self) -> SecretStr | None:
        """The salt of hashed columns a resolved copy carries (`with_secrets`); None where it
        was not resolved."""
        return self._hash_salt

    def with_secrets(
        self, password: SecretStr | None = None, hash_salt: SecretStr | None = None
    ) -> SourceConfig:
        """A copy carrying secrets resolved elsewhere (`config.secrets`): `password` as the
        inline password, `hash_salt` as the salt of hashed columns; None keeps what is there."""
        copy = self.model_copy(update=None if password is None else {"password": password})
        if hash_salt is not None:
            copy._hash_salt = hash_salt
        return copy

    @field_validator("row_filters", mode="before")
    @classmethod
    def _no_filters(cls, value: Any) -> Any:
        """An empty job parameter (`--set source.row_filters=`) is no filter."""
        return {} if value in (None, "") else value

    def row_filter_of(self, table: str) -> str | None:
        """The predicate rows of `table` ("db.table") must hold to land; None: every row."""
        return next((f for p, f in self.row_filters.items() if table_matches(p, table)), None)

    @field_validator("tables", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        """`tables: customers, orders_.*` as well as a YAML list: the form a job parameter or
        `--set source.tables=a,b` gives. Commas never occur in the regular expressions a table
        pattern needs (a `{m,n}` quantifier would be split; write the list form for that)."""
        if isinstance(value, str):
            return [name.strip() for name in value.split(",") if name.strip()]
        return value

    @field_validator("server_id_range", mode="before")
    @classmethod
    def _dashed_range(cls, value: Any) -> Any:
        """`5400-5499` (Flink CDC's `server-id` form) or a single id, as well as `[low, high]`."""
        if isinstance(value, int) and not isinstance(value, bool):
            return (value, value)
        if isinstance(value, str):
            match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", value)
            if match is None:
                raise ValueError(f"expected LOW-HIGH like 5400-5499 or [5400, 5499], got {value!r}")
            low = int(match.group(1))
            return (low, int(match.group(2) or low))
        return value

    @field_validator("server_id_range")
    @classmethod
    def _range_ordered(cls, value: tuple[int, int]) -> tuple[int, int]:
        low, high = value
        if not 1 <= low <= high < 2**32:
            raise ValueError(f"must be [low, high] with 1 <= low <= high < 2^32, got {list(value)}")
        return value

    @field_validator("password_secret")
    @classmethod
    def _secret_reference(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[^/\s]+/[^/\s]+", value):
            raise ValueError(f"must be <scope>/<key>, e.g. binlake/source-password, not {value!r}")
        return value

    @field_validator("tls_ca", "tls_cert", "tls_key")
    @classmethod
    def _pem_file(cls, value: str | None) -> str | None:
        if value is not None and not Path(value).is_file():
            raise ValueError(f"expected a PEM file, but {value!r} is not a file")
        return value

    @model_validator(mode="after")
    def _tls_consistent(self) -> SourceConfig:
        """Refuse TLS files the mode would ignore: a CA that checks nothing, or a client
        certificate never sent, is a security setting that silently does not apply."""
        if self.tls_ca is not None and self.tls not in ("verify_ca", "verify_identity"):
            raise ValueError(
                f"source.tls_ca is set but source.tls is {self.tls}, which does not check the "
                "server's certificate: set source.tls to verify_ca or verify_identity, or "
                "remove source.tls_ca"
            )
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("source.tls_cert and source.tls_key go together: set both or neither")
        if self.tls_cert is not None and self.tls in ("disabled", "preferred"):
            raise ValueError(
                f"source.tls_cert is set but source.tls is {self.tls}: a client certificate "
                "needs source.tls required, verify_ca or verify_identity"
            )
        return self


class SnapshotConfig(_Section):
    #: Rows per chunk.
    chunk_size: Annotated[int, Field(ge=1)] = 8096
    #: Chunks of one table read at once (Spark tasks of one job).
    parallelism: Annotated[int, Field(ge=1)] = 4
    #: Tables read and committed at once, each by its own Spark job: many small tables share
    #: the machine instead of queueing behind each other's Delta commits. The source sees up to
    #: `parallelism × concurrent_tables` chunk reads at once. Each table in flight takes
    #: `parallelism` server ids of `source.server_id_range`; fewer tables run at once when the
    #: range holds fewer.
    concurrent_tables: Annotated[int, Field(ge=1)] = 4
    #: Split key per table, required for tables without a primary key: a primary-key column,
    #: or where there is none a NOT NULL column with a single-column UNIQUE index.
    split_keys: dict[str, str] = Field(default_factory=dict)
    #: Even splitting applies while (max - min + 1) / rows lies within these bounds (Flink's).
    distribution_factor_upper: Annotated[float, Field(gt=0)] = 1000.0
    distribution_factor_lower: Annotated[float, Field(gt=0)] = 0.05
    #: Chunks committed to bronze and the ledger together; 0 = automatic: enough chunks for
    #: about 1,000,000 rows, at least 4 × parallelism. Smaller loses less work to a crash; larger
    #: spends less of the snapshot in Delta commits, each a fixed cost whatever its rows
    #: (docs/performance.md#measured-constants).
    chunks_per_commit: Annotated[int, Field(ge=0)] = 0
    #: Rows a second the snapshot reads from the source at most, over all its readers; 0 = no
    #: cap. The readers that can run at once share it evenly (the tables still to read, no more
    #: than Spark's task slots), each waiting after a read until its rows are paid.
    max_rows_per_second: Annotated[int, Field(ge=0)] = 0

    @property
    def commit_batch(self) -> int:
        if self.chunks_per_commit:
            return self.chunks_per_commit
        return max(4 * self.parallelism, -(-_ROWS_PER_COMMIT // self.chunk_size))


class TableLayout(_Section):
    """How a table's Delta tables are laid out (`lake.table_layout`)."""

    #: Liquid clustering columns of its bronze and silver tables (source column names).
    cluster_by: list[str] = Field(default_factory=list)
    #: Table properties of its bronze, changelog and silver tables (`delta.*` ones are Delta's
    #: and checked by it; others are kept as given, e.g. an owner tag).
    properties: dict[str, str] = Field(default_factory=dict)

    @field_validator("properties", mode="before")
    @classmethod
    def _text_values(cls, value: Any) -> Any:
        """YAML reads `true` and `30` as a boolean and a number; Delta keeps text."""
        if isinstance(value, dict):
            return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}
        return value


class LakeConfig(_Section):
    #: A local path, a `/Volumes/...` path or a URI (`file://`, `s3://`, `abfss://`, `dbfs:/`).
    root: str = "./lakehouse"
    #: A catalog for bronze, the changelog and silver (Unity Catalog on Databricks, or a local
    #: session's `spark_catalog`): its tables `<catalog>.<bronze_schema>_<db>.<table>` (silver:
    #: `silver_schema`). Unset: Delta tables at paths under `root`. Either way the ledger, the
    #: schema history and the checkpoints live under `root`.
    catalog: str | None = None
    bronze_schema: str = "bronze"
    silver_schema: str = "silver"
    #: Record what each job does (snapshot commits, stream batches with their lag, DDL applied,
    #: tables joined or reset, warnings, errors) in the event table: `_system/events`, or
    #: `<catalog>.<silver_schema>_<db>.binlake_events` with `catalog`.
    event_log: bool = True
    #: Per table (name, `db.table` or a regex of either): liquid clustering columns and table
    #: properties, applied when its tables are created and kept through re-snapshots and
    #: schema changes.
    table_layout: dict[str, TableLayout] = Field(default_factory=dict)

    @field_validator("table_layout", mode="before")
    @classmethod
    def _no_layout(cls, value: Any) -> Any:
        """An empty job parameter (`--set lake.table_layout=`) is no layout."""
        return {} if value in (None, "") else value

    def layout_of(self, table: str) -> TableLayout | None:
        """The layout of `table`'s Delta tables ("db.table"); None: Delta's defaults."""
        return next((v for p, v in self.table_layout.items() if table_matches(p, table)), None)

    @model_validator(mode="after")
    def _catalog_names(self) -> LakeConfig:
        if self.catalog is not None:
            for key in ("catalog", "bronze_schema", "silver_schema"):
                problem = self.name_problem(getattr(self, key))
                if problem:
                    raise ValueError(
                        f"{key} {getattr(self, key)!r} cannot name a catalog object: it {problem}"
                    )
        return self

    @staticmethod
    def name_problem(name: str) -> str | None:
        """Why `name` cannot name a catalog, schema or table (None: it can): Unity Catalog refuses
        a period, a space, a slash and control characters, and Spark's `saveAsTable` cannot parse
        a backtick back. A catalog may refuse more (a local `spark_catalog` takes only letters,
        digits and `_`) and says so itself."""
        if not name:
            return "is empty"
        if len(name) > 255:
            return "is longer than 255 characters"
        bad = re.search(r"[.\s/`\x00-\x1f\x7f]", name)
        return f"holds {bad.group()!r}" if bad else None

    def catalog_schema(self, layer: Literal["bronze", "silver"], database: str) -> str:
        """The catalog schema of `database`'s bronze and changelog tables (`<bronze_schema>_<db>`)
        or of its silver tables; refuses a name the catalog cannot hold."""
        name = f"{self.bronze_schema if layer == 'bronze' else self.silver_schema}_{database}"
        problem = self.name_problem(name)
        if problem:
            raise ConfigError(
                f"lake.catalog is set, and the source database {database!r} makes the schema name "
                f"{name!r}, which cannot name a catalog object: it {problem}"
            )
        return name

    def path(self, *parts: str) -> str:
        """A place under `root`: an absolute local path, or for a URI root the URI joined with
        `/` (`pathlib` would fold `s3://` and resolve `dbfs:/` locally)."""
        if self.is_uri(self.root):
            return "/".join([self.root.rstrip("/"), *parts])
        return str(Path(self.root, *parts).absolute())

    @staticmethod
    def is_uri(path: str) -> bool:
        """`scheme:/...` (`s3://b/x`, `dbfs:/x`, `file:///x`), not a local path."""
        return re.match(r"[A-Za-z][A-Za-z0-9+.-]+:/", path) is not None


class StreamConfig(_Section):
    startup_mode: Literal["initial", "latest-offset", "specific-offset", "timestamp", "gtid"] = (
        "initial"
    )
    #: For specific-offset: the binlog file and position to start at.
    startup_file: str | None = None
    startup_pos: int | None = None
    #: For timestamp: the first event at or after this time (ISO 8601, UTC if no zone).
    startup_timestamp: datetime | None = None
    #: For gtid: the first transaction after this GTID position: on MariaDB `0-1-100`, one
    #: `domain-server-sequence` per replication domain, as `@@gtid_binlog_pos` prints it; on
    #: MySQL a GTID set, `uuid:1-100[,uuid:1-7]`, as `@@gtid_executed` prints it.
    startup_gtid: str | None = None
    trigger_interval: str = "5s"
    #: How a continuous `binlake stream` triggers its batches: `processing_time` (one query, a
    #: batch every `trigger_interval`), `available_now` (a run of the catch-up every
    #: `trigger_interval`: for compute that runs only AvailableNow, as Databricks serverless),
    #: `auto` (the first, or the second where the compute refuses it).
    trigger: Literal["auto", "processing_time", "available_now"] = "auto"
    job_name: str = "silver"
    #: What a DDL on a captured table does to silver: `lenient` keeps every column (a dropped
    #: column reads NULL from then on, a renamed one is added under its new name), `evolve`
    #: mirrors the source's columns, `stop` stops the stream before the DDL.
    schema_changes: Literal["evolve", "lenient", "stop"] = "lenient"
    #: A DDL silver cannot follow from the binlog (rows removed or replaced with no row events:
    #: DROP/TRUNCATE/EXCHANGE PARTITION; a table renamed onto a captured name; a change silver's
    #: columns cannot take): `resnapshot` snapshots that table again by itself while the others
    #: keep streaming, then rejoins it; `stop` stops the stream before it with the remedy.
    on_unfollowable_ddl: Literal["resnapshot", "stop"] = "resnapshot"
    #: The source purged binlog the stream had not read (startup_mode `initial`): `resnapshot`
    #: snapshots the job's tables again and starts the job anew under the same name (silver
    #: replaced from the new snapshot); `stop` stops with the remedy (exit 6).
    on_binlog_purged: Literal["resnapshot", "stop"] = "resnapshot"
    #: The most binlog bytes one batch reads, so a backlog (a stream paused over a weekend)
    #: drains as a series of ordinary batches with steady memory. A batch ends between
    #: transactions, so a single larger transaction is a batch of its own. `null`: no bound.
    max_bytes_per_batch: Annotated[int, Field(ge=1024)] | None = 64 * 2**20
    #: The most row changes of the captured tables one batch reads (an update is one change),
    #: bounding a batch of narrow rows, whose bytes understate its rows, the same way. A
    #: transaction of more changes is a batch of its own. `null`: no bound.
    max_changes_per_batch: Annotated[int, Field(ge=1)] | None = 500_000
    #: Binlog reads of one large batch: a batch of more binlog bytes than `bytes_per_read_task`
    #: is cut between transactions into up to this many reads of about equal bytes, decoded by
    #: Spark tasks side by side (from the batch's first DDL on, one task reads it). Each read
    #: takes a server id of `source.server_id_range`, down from the stream's, of those the
    #: snapshot's readers leave free; 1: every batch is one read.
    read_tasks: Annotated[int, Field(ge=1)] = 4
    #: The fewest binlog bytes a batch's read task is given.
    bytes_per_read_task: Annotated[int, Field(ge=1024)] = 4 * 2**20

    @field_validator("trigger_interval")
    @classmethod
    def _duration(cls, value: str) -> str:
        if not _DURATION.match(value):
            raise ValueError(f"expected a duration like '5s', '500ms' or '1m', got {value!r}")
        return value

    @property
    def trigger_seconds(self) -> float:
        match = _DURATION.match(self.trigger_interval)
        assert match is not None
        return float(match.group(1)) * _DURATION_UNITS[match.group(2)]

    @field_validator("startup_file")
    @classmethod
    def _binlog_name(cls, value: str | None) -> str | None:
        if value is not None and not re.search(r"\.\d+$", value):
            raise ValueError(f"expected a binlog file name like 'mysql-bin.000042', got {value!r}")
        return value

    @field_validator("startup_gtid")
    @classmethod
    def _gtid_position(cls, value: str | None) -> str | None:
        """A MariaDB position, or a MySQL GTID set (the server's own syntax, tags included)."""
        if value is None or (not is_gtid_set(value) and _GTID_POSITION.match(value)):
            return value
        if is_gtid_set(value):
            try:
                return str(GtidSet.parse(value))
            except GtidSetError as exc:
                raise ValueError(f"expected a MySQL GTID set, got {value!r}: {exc}") from None
        raise ValueError(
            "expected a MariaDB GTID position like '0-1-100' or '0-1-100,1-2-7', or a MySQL "
            f"GTID set like '3e11fa47-71ca-11e1-9e33-c80aa9429562:1-100', got {value!r}"
        )

    @field_validator("startup_pos")
    @classmethod
    def _binlog_pos(cls, value: int | None) -> int | None:
        if value is not None and value < 4:
            raise ValueError(f"binlog positions start at 4 (after the file header), got {value}")
        return value

    @model_validator(mode="after")
    def _mode_needs_its_keys(self) -> StreamConfig:
        if self.startup_mode == "specific-offset" and (
            self.startup_file is None or self.startup_pos is None
        ):
            raise ValueError("startup_mode specific-offset needs startup_file and startup_pos")
        if self.startup_mode == "timestamp" and self.startup_timestamp is None:
            raise ValueError("startup_mode timestamp needs startup_timestamp")
        if self.startup_mode == "gtid" and self.startup_gtid is None:
            raise ValueError("startup_mode gtid needs startup_gtid")
        return self


#: `silver.history`: each key's current row, or every version of it (SCD type 2).
SilverHistory = Literal["latest", "scd2"]


class Route(_Section):
    """Source tables merged into one silver table (`silver.routes`)."""

    #: A regex fully matching `db.table` (or the table's name), as `source.tables` takes them.
    source: str
    #: The silver table, `db.table` or a name in the source table's own database; `\1`, `\2`
    #: take the groups `source` captured (`shop_(eu|us)_[0-9]+\.orders` → `shop.orders_\1`).
    target: str

    @field_validator("source")
    @classmethod
    def _regex(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"{value!r} is not a regular expression: {exc}") from None
        return value

    @field_validator("target")
    @classmethod
    def _table_name(cls, value: str) -> str:
        if not value or value.count(".") > 1 or "" in value.split("."):
            raise ValueError(f"expected a table name or db.table, got {value!r}")
        return value

    def target_of(self, table: str) -> str | None:
        """The silver table ("db.table") `table` ("db.table") lands in, if this route takes it."""
        database, name = split_qualified(table)
        match = re.fullmatch(self.source, table) or re.fullmatch(self.source, name)
        if match is None:
            return None
        try:
            target = match.expand(self.target)
        except (re.error, IndexError) as exc:
            raise ConfigError(
                f"silver.routes: target {self.target!r} of {self.source!r} cannot name the "
                f"silver table of {table}: {exc}"
            ) from None
        return target if "." in target else qualified(database, target)


class SilverConfig(_Section):
    #: `hard`: a row deleted at the source is deleted from silver. `soft`: it stays, with
    #: `_deleted_at` set to the delete's binlog commit time (NULL on live rows); a key inserted
    #: again is live again.
    deletes: Literal["hard", "soft"] = "hard"
    #: `latest`: silver holds each key's current row. `scd2`: silver holds every version of
    #: each row (slowly changing dimension type 2), with `_valid_from`/`_valid_to` (binlog
    #: commit times) and `_is_current`, ordered by binlog position; a deleted row is kept as
    #: its ended last version, so `deletes` concerns the tables of latest rows only.
    history: SilverHistory = "latest"
    #: Per-table `history`, by table name, `db.table` or a regex of either (wins over
    #: `history`): `{customers: scd2}`.
    history_tables: dict[str, SilverHistory] = Field(default_factory=dict)
    #: Source tables merged into one silver table each (sharded tables), the first route whose
    #: `source` matches a table taking it; silver's key leads with `_source_db` and
    #: `_source_table`, so equal keys of two shards stay two rows.
    routes: list[Route] = Field(default_factory=list)

    @field_validator("routes", mode="before")
    @classmethod
    def _no_routes(cls, value: Any) -> Any:
        """An empty job parameter (`--set silver.routes=`) is no route."""
        return [] if value in (None, "") else value

    def route_of(self, table: str) -> str | None:
        """The silver table ("db.table") that `table` ("db.table") is routed into; None: its
        own."""
        return next((t for r in self.routes if (t := r.target_of(table)) is not None), None)

    @field_validator("history_tables", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        """An empty job parameter (`--set silver.history_tables=`) is no per-table history."""
        return {} if value in (None, "") else value

    def history_of(self, table: str) -> SilverHistory:
        """The history kept for `table` ("db.table")."""
        for pattern, history in self.history_tables.items():
            if table_matches(pattern, table):
                return history
        return self.history


class Config(_Section):
    source: SourceConfig
    snapshot: SnapshotConfig = Field(default_factory=SnapshotConfig)
    lake: LakeConfig = Field(default_factory=LakeConfig)
    stream: StreamConfig = Field(default_factory=StreamConfig)
    silver: SilverConfig = Field(default_factory=SilverConfig)

    @model_validator(mode="after")
    def _enough_server_ids(self) -> Config:
        low, high = self.source.server_id_range
        needed = self.snapshot.parallelism + 1
        if high - low + 1 < needed:
            raise ValueError(
                f"source.server_id_range {[low, high]} holds {high - low + 1} ids; "
                f"snapshot.parallelism {self.snapshot.parallelism} plus the stream need {needed}"
            )
        return self

    @property
    def stream_server_id(self) -> int:
        return self.source.server_id_range[1]

    @property
    def stream_read_ids(self) -> tuple[int, ...]:
        """The server ids of one stream batch's binlog reads (`stream.read_tasks`): the stream's
        own, then down from it those the snapshot's table slots leave free, since a snapshot
        runs beside the stream (a table joining, one sent back to its snapshot) and the source
        evicts a replica connection when another registers with its id."""
        low, high = self.source.server_id_range
        free = high - (low + self.table_slots * self.snapshot.parallelism)
        return tuple(range(high, high - 1 - min(self.stream.read_tasks - 1, free), -1))

    def snapshot_server_id(self, reader: int) -> int:
        return self.source.server_id_range[0] + reader

    @property
    def table_slots(self) -> int:
        """Tables the snapshot reads at once: `snapshot.concurrent_tables`, or fewer when the
        server-id range (less the stream's id) cannot give each its `parallelism` ids."""
        low, high = self.source.server_id_range
        return max(
            1, min(self.snapshot.concurrent_tables, (high - low) // self.snapshot.parallelism)
        )


def load_config(path: str | Path, overrides: dict[str, str] | None = None) -> Config:
    """Read, override and validate a config file; raise `ConfigError` naming the bad key."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"config file {str(path)!r} cannot be read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        # The parser's message quotes the offending line, which may hold a secret: give only
        # where it is.
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"config file {str(path)!r} is not valid YAML{where}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a mapping at the top level")
    return parse_config(raw, overrides)


def parse_config(raw: dict[str, Any], overrides: dict[str, str] | None = None) -> Config:
    """Validate a config mapping; `overrides` are dotted keys with YAML-typed values."""
    raw = _apply_overrides(raw, overrides or {})
    try:
        return Config.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            _problem(err["loc"], err["type"], err["msg"])
            for err in exc.errors(include_url=False, include_input=False)
        )
        raise ConfigError(f"invalid config: {problems}") from None


def _problem(loc: tuple[int | str, ...], kind: str, message: str) -> str:
    """One validation error as `dotted.key: what is wrong`, without the input (it may be a
    secret); an unknown key or section gets the closest known name of its section."""
    where = ".".join(str(p) for p in loc) or "(top level)"
    if kind == "extra_forbidden":
        what = "unknown section" if len(loc) == 1 else "unknown key"
        return f"{where}: {what}{_did_you_mean(loc)}"
    return f"{where}: {message.removeprefix('Value error, ')}"


def _did_you_mean(loc: tuple[int | str, ...]) -> str:
    """` (did you mean 'chunk_size'?)` for a misspelt key, from its section model's fields."""
    model: type[BaseModel] = Config
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        inner = field.annotation if field is not None else None
        if not (isinstance(inner, type) and issubclass(inner, BaseModel)):
            return ""
        model = inner
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _apply_overrides(raw: dict[str, Any], overrides: dict[str, str]) -> dict[str, Any]:
    merged: dict[str, Any] = {k: dict(v) if isinstance(v, dict) else v for k, v in raw.items()}
    for dotted, text in overrides.items():
        *parents, key = dotted.split(".")
        if not parents or not all(parents) or not key:
            raise ConfigError(f"override {dotted!r} must be a dotted key like 'source.host'")
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            value = text
        target = merged
        for depth, part in enumerate(parents):
            child = target.get(part)
            if child is None:
                child = {}
            elif not isinstance(child, dict):
                raise ConfigError(
                    f"override {dotted!r}: {'.'.join(parents[: depth + 1])!r} is not a section"
                )
            else:
                child = dict(child)
            target[part] = child
            target = child
        target[key] = value
    return merged
