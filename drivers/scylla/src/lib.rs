//! The ScyllaDB driver (Apache Cassandra 5 stands in for ScyllaDB where it is not
//! installed: same CQL protocol, same driver). Every table of the read model's catalog
//! (`recap_readmodel::tables`) is a CQL table of `schemas/cql/recap.cql`; each statement
//! is prepared once, bounded by the request timeout and marked idempotent (but the
//! conditional inserts below), and names its table with the keyspace (`keyspace.table`):
//! the session sets no keyspace, as a prepared statement that leaves its keyspace to
//! the session's `USE` is ambiguous (Cassandra warns every connection that prepares one).
//!
//! The semantics are the embedded driver's: writes carry `USING TIMESTAMP` (the row's
//! LWW clock), deletes are timestamped tombstones (CQL resolves ties in favour of the
//! tombstone, as the embedded driver does), expiring rows carry `USING TTL` (long enough
//! that CQL keeps them past their `expires_at`, [`ttl_seconds`]) and their `expires_at`
//! is checked on read, so a row is read until its `expires_at` and not after, and scans
//! walk the clustering order with multi-column slice restrictions, paged. The rows of
//! one write call that share a partition key go in one request, an unlogged batch
//! ([`write_groups`]), each row with its own timestamp and TTL.
//!
//! Tables written only if absent ([`Clock::FirstWriteWins`]) are written with a
//! lightweight transaction, `INSERT ... IF NOT EXISTS USING TTL ?`: a Paxos round among
//! the replicas at the serial consistency decides which insert of a key wins, whatever
//! the writers' clocks, and the others are told the row exists. Such a statement takes
//! no `USING TIMESTAMP` (CQL refuses one), is not idempotent (a retry could report the
//! call's own write as someone else's, so the driver never retries it), and its rows
//! are never written otherwise (see `Driver`'s rule). They are read at the serial
//! consistency too, so a read sees every decided insert whatever `--consistency` is.
//! Like every expiring row's, their TTL outlives their `expires_at` (a transaction
//! decides by whether CQL still holds the row), and a row held past its `expires_at` is
//! replaced by a second transaction, `UPDATE ... IF expires_at = <the held row's>`: a
//! key is written again exactly when its row has expired, as on the embedded store.
//! The serial consistency is LOCAL_SERIAL when the configured consistency is a local
//! one (`local_quorum`, `local_one`: one datacenter decides, as it does for every other
//! read and write), else SERIAL.

use std::collections::HashMap;
use std::ops::{Bound, ControlFlow};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::{self, StreamExt, TryStreamExt};
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::deserialize::row::{ColumnIterator, DeserializeRow};
use scylla::deserialize::value::DeserializeValue;
use scylla::response::query_result::QueryResult;
use scylla::response::PagingState;
use scylla::serialize::value::SerializeValue;
use scylla::statement::batch::{Batch, BatchStatement, BatchType};
use scylla::statement::prepared::PreparedStatement;
pub use scylla::statement::{Consistency, SerialConsistency};
use scylla::value::{CqlValue, Row as CqlRow};

use recap_readmodel::driver::{
    check_conditional_write, check_plain_write, now_micros, BodiesPage, Driver, Mutation, Offered, Op, PageBuilder, Row, ScanRange, StoreError,
};
use recap_readmodel::table::{cql_type, Clock, ColumnType, Order, Table, Val};

mod cluster;
pub use cluster::{Credentials, ScyllaCluster, ScyllaTls};

/// How to reach the cluster.
#[derive(Clone, Debug)]
pub struct ScyllaConfig {
    pub cluster: ScyllaCluster,
    pub keyspace: String,
    pub consistency: Consistency,
    /// Bound of every request (and of connecting).
    pub timeout: Duration,
    /// Write requests of one batch in flight at once (the rows of one partition key go in
    /// one request).
    pub write_concurrency: usize,
}

/// The serial consistency of lightweight transactions and of reads of tables written
/// by them: the datacenter's own Paxos round when `consistency` is a local one.
pub fn serial_consistency_for(consistency: Consistency) -> SerialConsistency {
    match consistency {
        Consistency::LocalQuorum | Consistency::LocalOne => SerialConsistency::LocalSerial,
        _ => SerialConsistency::Serial,
    }
}

/// Parses a consistency level name (`local_quorum`, `quorum`, `one`, ...).
pub fn parse_consistency(name: &str) -> Result<Consistency, String> {
    Ok(match name.to_ascii_lowercase().as_str() {
        "any" => Consistency::Any,
        "one" => Consistency::One,
        "two" => Consistency::Two,
        "three" => Consistency::Three,
        "quorum" => Consistency::Quorum,
        "all" => Consistency::All,
        "local_quorum" => Consistency::LocalQuorum,
        "each_quorum" => Consistency::EachQuorum,
        "local_one" => Consistency::LocalOne,
        other => return Err(format!("unknown consistency level {other:?}")),
    })
}

pub struct ScyllaDriver {
    session: Session,
    config: ScyllaConfig,
    statements: Mutex<HashMap<String, Arc<PreparedStatement>>>,
    /// The statements of reads by their shape, so that a read finds its statement
    /// without writing out its CQL first (see [`ReadShape`]).
    reads: Mutex<HashMap<ReadShape, Arc<PreparedStatement>>>,
}

/// Everything a read's CQL depends on: its table, the clustering columns it binds
/// (a get) or the prefixes and inclusiveness of its slice bounds (a scan), whether it
/// has a LIMIT and whether it reads the body's write time. Equal shapes have equal CQL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum ReadShape {
    Get { table: &'static str, clustering: usize, write_time: bool },
    GetMany { table: &'static str },
    Scan { table: &'static str, start: Option<(usize, bool)>, end: Option<(usize, bool)>, limited: bool, write_time: bool },
}

/// The prefix length and inclusiveness of a slice bound that restricts anything.
fn bound_shape(bound: &Bound<Vec<Val>>) -> Option<(usize, bool)> {
    match bound {
        Bound::Included(prefix) if !prefix.is_empty() => Some((prefix.len(), true)),
        Bound::Excluded(prefix) if !prefix.is_empty() => Some((prefix.len(), false)),
        _ => None,
    }
}

/// A key value as a statement's bound value, borrowed: reads copy no key into a value.
fn bound_value(value: &Val) -> &(dyn SerializeValue + Sync) {
    match value {
        Val::Text(text) => text,
        Val::Int(number) => number,
    }
}

fn unavailable(error: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(error.to_string())
}

fn corrupt(error: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(error.to_string())
}

fn cql_value(value: &Val) -> CqlValue {
    match value {
        Val::Text(text) => CqlValue::Text(text.clone()),
        Val::Int(number) => CqlValue::BigInt(*number),
    }
}

fn from_cql(value: Option<&CqlValue>, kind: ColumnType) -> Option<Val> {
    match (value?, kind) {
        (CqlValue::Text(text), ColumnType::Text) => Some(Val::Text(text.clone())),
        (CqlValue::Ascii(text), ColumnType::Text) => Some(Val::Text(text.clone())),
        (CqlValue::BigInt(number), ColumnType::BigInt) => Some(Val::Int(*number)),
        _ => None,
    }
}

/// The CQL operator that keeps rows on the far side of a bound, in clustering order.
fn slice_operator(table: &Table, is_start: bool, inclusive: bool) -> &'static str {
    let descending = table.clustering.first().is_some_and(|column| column.order == Order::Desc);
    // In clustering order "after" is "greater" for ascending columns, "less" for
    // descending ones. Every table's clustering columns share one direction.
    match (is_start, descending, inclusive) {
        (true, false, true) => ">=",
        (true, false, false) => ">",
        (true, true, true) => "<=",
        (true, true, false) => "<",
        (false, false, true) => "<=",
        (false, false, false) => "<",
        (false, true, true) => ">=",
        (false, true, false) => ">",
    }
}

/// The restriction of a slice bound of shape `bound` ([`bound_shape`]) on `clause`.
fn slice_clause(table: &Table, bound: Option<(usize, bool)>, is_start: bool, clause: &mut String) {
    let Some((length, inclusive)) = bound else {
        return;
    };
    let columns: Vec<&str> = table.clustering.iter().take(length).map(|column| column.name).collect();
    let markers = vec!["?"; columns.len()].join(", ");
    clause.push_str(&format!(" AND ({}) {} ({markers})", columns.join(", "), slice_operator(table, is_start, inclusive)));
}

/// The values a slice bound binds, in the order [`slice_clause`] put their markers.
fn slice_values<'a>(bound: &'a Bound<Vec<Val>>, values: &mut Vec<&'a (dyn SerializeValue + Sync)>) {
    if let Bound::Included(prefix) | Bound::Excluded(prefix) = bound {
        values.extend(prefix.iter().map(bound_value));
    }
}

/// What [`ScyllaDriver::migrate`] changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Migration {
    pub keyspace_created: bool,
    pub tables_created: Vec<String>,
    /// `table.column` of each column added to an existing table.
    pub columns_added: Vec<String>,
    /// Tables that were already as recap needs them.
    pub tables_unchanged: usize,
}

impl std::fmt::Display for Migration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |items: &[String]| if items.is_empty() { "none".to_string() } else { items.join(", ") };
        write!(
            f,
            "keyspace {}; tables created: {}; columns added: {}; tables already up to date: {}",
            if self.keyspace_created { "created" } else { "already there" },
            list(&self.tables_created),
            list(&self.columns_added),
            self.tables_unchanged
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The keyspace holds tables that cannot be upgraded in place; nothing was changed.
    #[error("keyspace {keyspace} cannot be upgraded in place, nothing was changed: {}", conflicts.join("; "))]
    Incompatible { keyspace: String, conflicts: Vec<String> },
}

/// One column as `system_schema.columns` describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ColumnSpec {
    /// `partition_key`, `clustering`, `regular` or `static`.
    kind: String,
    /// Place in the partition key or the clustering key; -1 for other columns.
    position: i32,
    kind_type: String,
    /// `asc` or `desc` for clustering columns, else `none`.
    order: String,
}

impl std::fmt::Display for ColumnSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind.as_str() {
            "partition_key" => write!(f, "partition key column {} of type {}", self.position, self.kind_type),
            "clustering" => write!(f, "clustering column {} of type {}, {}", self.position, self.kind_type, self.order),
            kind => write!(f, "{kind} column of type {}", self.kind_type),
        }
    }
}

/// The columns `table` has in CQL, by name.
fn expected_columns(table: &Table) -> Vec<(&'static str, ColumnSpec)> {
    let spec = |kind: &str, position: i32, kind_type: ColumnType, order: &str| ColumnSpec {
        kind: kind.to_string(),
        position,
        kind_type: cql_type(kind_type).to_string(),
        order: order.to_string(),
    };
    let partition = table.partition.iter().zip(0..).map(|(column, position)| (column.name, spec("partition_key", position, column.kind, "none")));
    let clustering = table
        .clustering
        .iter()
        .zip(0..)
        .map(|(column, position)| (column.name, spec("clustering", position, column.kind, if column.order == Order::Desc { "desc" } else { "asc" })));
    let regular = [("body", spec("regular", -1, ColumnType::Text, "none")), ("expires_at", spec("regular", -1, ColumnType::BigInt, "none"))];
    partition.chain(clustering).chain(regular).collect()
}

/// Every column of every table of `keyspace`, by table then column name.
async fn existing_columns(session: &Session, keyspace: &str) -> Result<HashMap<String, HashMap<String, ColumnSpec>>, StoreError> {
    let cql = "SELECT table_name, column_name, kind, position, type, clustering_order FROM system_schema.columns WHERE keyspace_name = ?";
    let result = session.query_unpaged(cql, (keyspace.to_ascii_lowercase(),)).await.map_err(unavailable)?;
    let rows = result.into_rows_result().map_err(corrupt)?;
    let mut tables: HashMap<String, HashMap<String, ColumnSpec>> = HashMap::new();
    for row in rows.rows::<(String, String, String, i32, String, String)>().map_err(corrupt)? {
        let (table, column, kind, position, kind_type, order) = row.map_err(corrupt)?;
        tables.entry(table).or_default().insert(column, ColumnSpec { kind, position, kind_type, order });
    }
    Ok(tables)
}

async fn keyspace_exists(session: &Session, keyspace: &str) -> Result<bool, StoreError> {
    let cql = "SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?";
    let result = session.query_unpaged(cql, (keyspace.to_ascii_lowercase(),)).await.map_err(unavailable)?;
    Ok(result.into_rows_result().map_err(corrupt)?.rows_num() > 0)
}

/// A session that knows of `keyspace` only. By default the driver fetches the schema of
/// every keyspace on the cluster, columns included, and fetches it again whenever one
/// changes: a process's memory then follows what other applications keep on the same
/// cluster (on a node shared with test runs, 10 keyspaces of recap's 36 tables added
/// 8.6 MiB to an idle query-api). recap reads no schema through the driver (migrate
/// queries `system_schema` itself), and routing needs only the keyspace's replication
/// and its tables' partitioners, which the lightweight metadata keeps.
fn session_builder(cluster: &ScyllaCluster, keyspace: &str, timeout: Duration) -> SessionBuilder {
    cluster.builder(timeout).keyspaces_to_fetch([keyspace.to_ascii_lowercase()]).fetch_full_schema_metadata(false)
}

/// Whether `name` can name a keyspace unquoted in a statement (as CQL allows: letters,
/// digits and `_`, at most 48), so that interpolating it changes nothing else.
fn keyspace_name_valid(name: &str) -> bool {
    (1..=48).contains(&name.len()) && name.bytes().all(|byte| byte.is_ascii_alphanumeric() || byte == b'_')
}

/// TRUNCATE statements [`ScyllaDriver::truncate_all`] has in flight at once.
const TRUNCATES_AT_ONCE: usize = 4;

impl ScyllaDriver {
    /// Connects to the cluster; an error (Unavailable) until `config.keyspace` exists, so
    /// that a role started before `recap migrate` waits for it, as it would for a node.
    pub async fn connect(config: ScyllaConfig) -> Result<ScyllaDriver, StoreError> {
        if !keyspace_name_valid(&config.keyspace) {
            return Err(StoreError::Unavailable(format!("{:?} is not a keyspace name (letters, digits and _, at most 48)", config.keyspace)));
        }
        let session = tokio::time::timeout(config.timeout * 5, session_builder(&config.cluster, &config.keyspace, config.timeout).build())
            .await
            .map_err(|_| StoreError::Unavailable(format!("connecting to {:?} timed out", config.cluster.nodes)))?
            .map_err(unavailable)?;
        if !keyspace_exists(&session, &config.keyspace).await? {
            return Err(StoreError::Unavailable(format!("keyspace {} does not exist (`recap migrate` creates it)", config.keyspace)));
        }
        Ok(ScyllaDriver { session, config, statements: Mutex::new(HashMap::new()), reads: Mutex::new(HashMap::new()) })
    }

    /// Creates or upgrades the keyspace and the tables of `tables` (whose statements are
    /// `schemas/cql/recap.cql`). Idempotent, and safe to run from several processes at
    /// once:
    ///
    /// - a missing keyspace is created with `replication`; an existing one keeps its own
    ///   (changing it is an `ALTER KEYSPACE` and a repair, an operator's decision);
    /// - a missing table is created;
    /// - a table missing a regular column (`body`, `expires_at`) gets it (`ALTER TABLE ADD`);
    ///   columns it has beyond them are left alone;
    /// - a table whose key differs (partition or clustering columns, their types or
    ///   order) cannot be upgraded in place: every such difference is reported and
    ///   nothing at all is changed.
    pub async fn migrate(cluster: &ScyllaCluster, keyspace: &str, replication: &str, tables: &[&Table], timeout: Duration) -> Result<Migration, MigrateError> {
        let session = tokio::time::timeout(timeout * 5, session_builder(cluster, keyspace, timeout).build())
            .await
            .map_err(|_| StoreError::Unavailable(format!("connecting to {:?} timed out", cluster.nodes)))?
            .map_err(unavailable)?;
        let mut migration = Migration::default();
        let existing = existing_columns(&session, keyspace).await?;
        let mut alters = Vec::new();
        let mut conflicts = Vec::new();
        for table in tables {
            let Some(columns) = existing.get(table.name) else {
                continue;
            };
            let expected_columns = expected_columns(table);
            for (name, expected) in &expected_columns {
                match columns.get(*name) {
                    Some(found) if found == expected => {}
                    None if expected.kind == "regular" => alters.push((table.name, *name, expected.kind_type.clone())),
                    found => conflicts.push(format!(
                        "{}.{name}: found {}, recap needs {expected}",
                        table.name,
                        found.map_or("no such column".into(), ToString::to_string)
                    )),
                }
            }
            for (name, found) in columns {
                if found.kind != "regular" && !expected_columns.iter().any(|(expected, _)| expected == name) {
                    conflicts.push(format!("{}.{name}: found {found}, recap's key has no such column", table.name));
                }
            }
        }
        if !conflicts.is_empty() {
            return Err(MigrateError::Incompatible { keyspace: keyspace.to_string(), conflicts });
        }
        if existing.is_empty() && !keyspace_exists(&session, keyspace).await? {
            let create = format!("CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {replication}");
            session.query_unpaged(create, ()).await.map_err(unavailable)?;
            migration.keyspace_created = true;
        }
        for table in tables {
            if existing.contains_key(table.name) {
                continue;
            }
            session.query_unpaged(table.create_statement_in(keyspace), ()).await.map_err(unavailable)?;
            migration.tables_created.push(table.name.to_string());
        }
        let altered: std::collections::HashSet<&str> = alters.iter().map(|(table, _, _)| *table).collect();
        migration.tables_unchanged = tables.len() - migration.tables_created.len() - altered.len();
        for (table, column, kind_type) in alters {
            let added = session.query_unpaged(format!("ALTER TABLE {keyspace}.{table} ADD {column} {kind_type}"), ()).await;
            if let Err(error) = added {
                // Another migrate may have added it since the columns were read.
                let now = existing_columns(&session, keyspace).await?;
                if now.get(table).and_then(|columns| columns.get(column)).map(|found| found.kind_type.as_str()) != Some(kind_type.as_str()) {
                    return Err(unavailable(error).into());
                }
            }
            migration.columns_added.push(format!("{table}.{column}"));
        }
        session.await_schema_agreement().await.map_err(unavailable)?;
        Ok(migration)
    }

    /// Empties every table of the read model (test and staging clean-up). TRUNCATE
    /// leaves no tombstone, so rows written afterwards count whatever their timestamps.
    /// A few tables are emptied at once: one at a time, each waits for the node to
    /// discard the table's data; all at once, the node's flushes stall the writes that
    /// follow past their timeout on a busy machine.
    pub async fn truncate_all(&self) -> Result<(), StoreError> {
        let truncates = recap_readmodel::tables::ALL.iter().map(|table| self.session.query_unpaged(format!("TRUNCATE {}", self.qualified(table)), ()));
        stream::iter(truncates).buffer_unordered(TRUNCATES_AT_ONCE).try_for_each(|_| async { Ok(()) }).await.map_err(unavailable)?;
        Ok(())
    }

    /// The names of the cluster's keyspaces (test clean-up).
    pub async fn keyspaces(cluster: &ScyllaCluster, timeout: Duration) -> Result<Vec<String>, StoreError> {
        let session = tokio::time::timeout(timeout * 5, cluster.builder(timeout).build())
            .await
            .map_err(|_| StoreError::Unavailable(format!("connecting to {:?} timed out", cluster.nodes)))?
            .map_err(unavailable)?;
        let result = session.query_unpaged("SELECT keyspace_name FROM system_schema.keyspaces", ()).await.map_err(unavailable)?;
        let rows = result.into_rows_result().map_err(corrupt)?;
        let names = rows.rows::<(String,)>().map_err(corrupt)?.map(|row| row.map(|(name,)| name)).collect::<Result<Vec<_>, _>>().map_err(corrupt)?;
        Ok(names)
    }

    /// Drops a keyspace and everything in it (test and staging clean-up).
    pub async fn drop_keyspace(cluster: &ScyllaCluster, keyspace: &str, timeout: Duration) -> Result<(), StoreError> {
        let session = tokio::time::timeout(timeout * 5, session_builder(cluster, keyspace, timeout).build())
            .await
            .map_err(|_| StoreError::Unavailable(format!("connecting to {:?} timed out", cluster.nodes)))?
            .map_err(unavailable)?;
        session.query_unpaged(format!("DROP KEYSPACE IF EXISTS {keyspace}"), ()).await.map_err(unavailable)?;
        Ok(())
    }

    /// The statement `cql`, prepared once and set up for `access`.
    async fn prepared(&self, cql: String, access: Access) -> Result<Arc<PreparedStatement>, StoreError> {
        if let Some(found) = self.statements.lock().map_err(|_| unavailable("statement cache poisoned"))?.get(&cql) {
            return Ok(found.clone());
        }
        // The driver bounds requests but not a PREPARE: a node that accepts it and never
        // answers would hold the caller (a projector's batch, its drain) indefinitely.
        let mut statement = tokio::time::timeout(self.config.timeout, self.session.prepare(cql.clone()))
            .await
            .map_err(|_| StoreError::Unavailable(format!("preparing a statement took over {} ms", self.config.timeout.as_millis())))?
            .map_err(unavailable)?;
        let serial = serial_consistency_for(self.config.consistency);
        match access {
            Access::Plain => {
                statement.set_consistency(self.config.consistency);
                statement.set_is_idempotent(true);
            }
            Access::SerialRead => {
                statement.set_consistency(match serial {
                    SerialConsistency::Serial => Consistency::Serial,
                    SerialConsistency::LocalSerial => Consistency::LocalSerial,
                });
                statement.set_is_idempotent(true);
            }
            Access::ConditionalInsert => {
                // The commit is written at the configured consistency, once Paxos at
                // the serial one has decided it.
                statement.set_consistency(self.config.consistency);
                statement.set_serial_consistency(Some(serial));
                statement.set_is_idempotent(false);
            }
        }
        statement.set_request_timeout(Some(self.config.timeout));
        statement.set_page_size(PAGE_ROWS);
        let statement = Arc::new(statement);
        self.statements.lock().map_err(|_| unavailable("statement cache poisoned"))?.insert(cql, statement.clone());
        Ok(statement)
    }

    /// `keyspace.table`, as every statement names a table.
    fn qualified(&self, table: &Table) -> String {
        format!("{}.{}", self.config.keyspace, table.name)
    }

    /// The statement of a read of `shape`, prepared from `cql` the first time.
    async fn read_statement(&self, shape: ReadShape, table: &Table, cql: impl FnOnce() -> String) -> Result<Arc<PreparedStatement>, StoreError> {
        if let Some(found) = self.reads.lock().map_err(|_| unavailable("statement cache poisoned"))?.get(&shape) {
            return Ok(found.clone());
        }
        let statement = self.prepared(cql(), Access::reading(table)).await?;
        self.reads.lock().map_err(|_| unavailable("statement cache poisoned"))?.insert(shape, statement.clone());
        Ok(statement)
    }

    /// The statement of a get that binds the partition and the first `clustering`
    /// clustering columns.
    async fn get_statement(&self, table: &'static Table, clustering: usize, write_time: bool) -> Result<Arc<PreparedStatement>, StoreError> {
        let clustering = clustering.min(table.clustering.len());
        self.read_statement(ReadShape::Get { table: table.name, clustering, write_time }, table, || {
            let mut cql = self.select(table, write_time);
            for column in table.clustering.iter().take(clustering) {
                cql.push_str(&format!(" AND {} = ?", column.name));
            }
            cql
        })
        .await
    }

    /// The rows of a get (`get`, `get_body`): the partition and at most the table's
    /// clustering columns bound, borrowed.
    async fn point_read(
        &self,
        table: &'static Table,
        partition: &[Val],
        clustering: &[Val],
        write_time: bool,
    ) -> Result<scylla::response::query_result::QueryRowsResult, StoreError> {
        let statement = self.get_statement(table, clustering.len(), write_time).await?;
        let values: Vec<&(dyn SerializeValue + Sync)> = partition.iter().chain(clustering.iter().take(table.clustering.len())).map(bound_value).collect();
        let result = self.session.execute_unpaged(&statement, values).await.map_err(unavailable)?;
        result.into_rows_result().map_err(corrupt)
    }

    /// `SELECT <clustering columns>, body, expires_at[, writetime(body)] ... WHERE
    /// <partition columns> = ?`: the write time only for reads that return it.
    fn select(&self, table: &Table, write_time: bool) -> String {
        let mut columns: Vec<&str> = table.clustering.iter().map(|column| column.name).collect();
        columns.extend(["body", "expires_at"]);
        if write_time {
            columns.push("writetime(body)");
        }
        let partition: Vec<String> = table.partition.iter().map(|column| format!("{} = ?", column.name)).collect();
        format!("SELECT {} FROM {} WHERE {}", columns.join(", "), self.qualified(table), partition.join(" AND "))
    }

    /// The second step of [`Driver::insert_if_absent`] on a key whose row has expired
    /// by its `expires_at` (`held`) while CQL still keeps it: a lightweight transaction
    /// that writes the new row only if the key still holds that row (`IF expires_at =
    /// held`), so that of racing calls exactly one replaces it. Not applied when another
    /// call replaced the row first, or when CQL dropped it meanwhile.
    async fn replace_expired(
        &self,
        table: &'static Table,
        partition: &[Val],
        clustering: &[Val],
        body: &str,
        expires_at: Option<i64>,
        held: i64,
    ) -> Result<bool, StoreError> {
        let mut values = Vec::new();
        let mut cql = format!("UPDATE {}", self.qualified(table));
        if let Some(expires_at) = expires_at {
            cql.push_str(" USING TTL ?");
            values.push(CqlValue::Int(ttl_seconds(expires_at)));
        }
        cql.push_str(" SET body = ?, ");
        values.push(CqlValue::Text(body.to_string()));
        match expires_at {
            Some(expires_at) => {
                cql.push_str("expires_at = ?");
                values.push(CqlValue::BigInt(expires_at));
            }
            // The row no longer expires: its old expiry goes.
            None => cql.push_str("expires_at = null"),
        }
        let keys: Vec<String> = table
            .partition
            .iter()
            .map(|column| column.name)
            .chain(table.clustering.iter().map(|column| column.name))
            .map(|name| format!("{name} = ?"))
            .collect();
        cql.push_str(&format!(" WHERE {} IF expires_at = ?", keys.join(" AND ")));
        values.extend(partition.iter().chain(clustering).map(cql_value));
        values.push(CqlValue::BigInt(held));
        let statement = self.prepared(cql, Access::ConditionalInsert).await?;
        let result = self.session.execute_unpaged(&statement, values).await.map_err(unavailable)?;
        Ok(matches!(conditional_outcome(table, result)?, Conditional::Applied))
    }

    /// A row as read back, or only its clustering key when it reads as absent (expired
    /// by this process's clock, or a body cell deleted under a key).
    fn to_row(table: &Table, row: CqlRow, now: i64) -> Result<Result<Row, Vec<Val>>, StoreError> {
        let mut columns = row.columns;
        let mut clustering = Vec::with_capacity(table.clustering.len());
        for (index, column) in table.clustering.iter().enumerate() {
            clustering.push(
                from_cql(columns.get(index).and_then(Option::as_ref), column.kind)
                    .ok_or_else(|| StoreError::Corrupt(format!("{}: bad clustering value", table.name)))?,
            );
        }
        let offset = table.clustering.len();
        let ts = match columns.get(offset + 2).and_then(Option::as_ref) {
            Some(CqlValue::BigInt(ts)) => *ts,
            _ => 0,
        };
        if let Some(CqlValue::BigInt(expires_at)) = columns.get(offset + 1).and_then(Option::as_ref) {
            if *expires_at <= now {
                return Ok(Err(clustering));
            }
        }
        let body = match columns.get_mut(offset).and_then(Option::take) {
            Some(CqlValue::Text(body)) => body,
            _ => return Ok(Err(clustering)),
        };
        Ok(Ok(Row { clustering, body, ts }))
    }

    async fn write_one(&self, mutation: &Mutation) -> Result<(), StoreError> {
        let (cql, values) = write_statement(&self.config.keyspace, mutation);
        let statement = self.prepared(cql, Access::Plain).await?;
        self.session.execute_unpaged(&statement, values).await.map_err(unavailable)?;
        Ok(())
    }

    /// Writes rows of one partition key as one unlogged batch: one request, whose rows
    /// land as separate writes would, each keeping its own timestamp and TTL.
    async fn write_batch(&self, group: &[&Mutation]) -> Result<(), StoreError> {
        let mut batch = Batch::new(BatchType::Unlogged);
        let mut values = Vec::with_capacity(group.len());
        for mutation in group {
            let (cql, row_values) = write_statement(&self.config.keyspace, mutation);
            batch.append_statement(BatchStatement::PreparedStatement(PreparedStatement::clone(&*self.prepared(cql, Access::Plain).await?)));
            values.push(row_values);
        }
        batch.set_consistency(self.config.consistency);
        batch.set_is_idempotent(true);
        batch.set_request_timeout(Some(self.config.timeout));
        self.session.batch(&batch, values).await.map_err(unavailable)?;
        Ok(())
    }
}

/// The CQL and the values of a plain write: an insert carrying the row's timestamp (and
/// its TTL when it expires), or a timestamped delete (CQL cannot remove a row without a
/// tombstone). Equal tables, operations and expiries give equal CQL.
pub fn write_statement(keyspace: &str, mutation: &Mutation) -> (String, Vec<CqlValue>) {
    let table = mutation.table;
    let key_columns: Vec<&str> = table.partition.iter().map(|column| column.name).chain(table.clustering.iter().map(|column| column.name)).collect();
    let mut values: Vec<CqlValue> = Vec::with_capacity(key_columns.len() + 4);
    let cql = match &mutation.op {
        Op::Put { body, expires_at } => {
            values.extend(mutation.partition.iter().chain(&mutation.clustering).map(cql_value));
            values.push(CqlValue::Text(body.clone()));
            let mut columns = key_columns.clone();
            columns.push("body");
            // No expires_at cell at all for rows that do not expire: writing a null
            // would write a tombstone.
            if let Some(expires_at) = expires_at {
                columns.push("expires_at");
                values.push(CqlValue::BigInt(*expires_at));
            }
            let markers = vec!["?"; columns.len()].join(", ");
            let mut cql = format!("INSERT INTO {keyspace}.{} ({}) VALUES ({markers}) USING TIMESTAMP ?", table.name, columns.join(", "));
            values.push(CqlValue::BigInt(mutation.ts));
            if let Some(expires_at) = expires_at {
                cql.push_str(" AND TTL ?");
                values.push(CqlValue::Int(ttl_seconds(*expires_at)));
            }
            cql
        }
        Op::Delete | Op::Purge => {
            values.push(CqlValue::BigInt(mutation.ts));
            values.extend(mutation.partition.iter().chain(&mutation.clustering).map(cql_value));
            let conditions: Vec<String> = key_columns.iter().map(|column| format!("{column} = ?")).collect();
            format!("DELETE FROM {keyspace}.{} USING TIMESTAMP ? WHERE {}", table.name, conditions.join(" AND "))
        }
    };
    (cql, values)
}

/// Rows one batch takes at most.
pub const BATCH_ROWS: usize = 32;

/// Bytes of keys and bodies one batch holds at most, so that a request stays small: far
/// under the size at which ScyllaDB warns of a batch (128 KiB; Cassandra does not check
/// the size of a batch of one partition key).
pub const BATCH_BYTES: usize = 32 * 1024;

/// The requests one write call makes: the rows of one partition key (the same key
/// values, in any of the keyspace's tables: they hash to the same token, so one replica
/// set takes them; Cassandra applies them as one mutation, ScyllaDB as one a table) go
/// together, in the order they first appear, at most [`BATCH_ROWS`] rows and
/// [`BATCH_BYTES`] a request; a group of one row is a plain statement. A request costs
/// a node far more than a row does: rows of a feed grouped so cost Cassandra a quarter
/// of its CPU a row written one a request, or less, and the client a sixth (`cargo
/// bench --bench distributed requests`, `docs/performance.md`).
pub fn write_groups(mutations: &[Mutation]) -> Vec<Vec<&Mutation>> {
    let mut groups: Vec<(Vec<&Mutation>, usize)> = Vec::new();
    // Each partition key's group still open to more rows.
    let mut open: HashMap<&[Val], usize> = HashMap::new();
    for mutation in mutations {
        let bytes = write_bytes(mutation);
        let joins = open.get(mutation.partition.as_slice()).copied().filter(|&index| {
            let (rows, held) = &groups[index];
            rows.len() < BATCH_ROWS && held + bytes <= BATCH_BYTES
        });
        match joins {
            Some(index) => {
                groups[index].0.push(mutation);
                groups[index].1 += bytes;
            }
            None => {
                open.insert(&mutation.partition, groups.len());
                groups.push((vec![mutation], bytes));
            }
        }
    }
    groups.into_iter().map(|(rows, _)| rows).collect()
}

/// About the bytes a row adds to a batch: its keys, its body, and 32 for its timestamp,
/// its expiry, its TTL and their framing.
fn write_bytes(mutation: &Mutation) -> usize {
    let key = |value: &Val| match value {
        Val::Text(text) => text.len(),
        Val::Int(_) => 8,
    };
    let body = match &mutation.op {
        Op::Put { body, .. } => body.len(),
        Op::Delete | Op::Purge => 0,
    };
    mutation.partition.iter().chain(&mutation.clustering).map(key).sum::<usize>() + body + 32
}

/// How a prepared statement runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    /// Plain reads and writes: the configured consistency; idempotent, so the driver may
    /// retry them on another node.
    Plain,
    /// Reads of a table written only if absent: at the serial consistency, so they see
    /// every insert a lightweight transaction decided.
    SerialRead,
    /// A lightweight transaction: never retried.
    ConditionalInsert,
}

impl Access {
    fn reading(table: &Table) -> Access {
        if table.clock == Clock::FirstWriteWins {
            Access::SerialRead
        } else {
            Access::Plain
        }
    }
}

#[async_trait]
impl Driver for ScyllaDriver {
    async fn get(&self, table: &'static Table, partition: &[Val], clustering: &[Val]) -> Result<Option<Row>, StoreError> {
        let rows = self.point_read(table, partition, clustering, true).await?;
        let now = now_micros();
        let first = rows.maybe_first_row::<CqlRow>().map_err(corrupt)?;
        match first {
            Some(row) => Ok(Self::to_row(table, row, now)?.ok()),
            None => Ok(None),
        }
    }

    /// As `get`, without the body's write time, and the body copied once from the frame.
    async fn get_body(&self, table: &'static Table, partition: &[Val], clustering: &[Val]) -> Result<Option<String>, StoreError> {
        let rows = self.point_read(table, partition, clustering, false).await?;
        let now = now_micros();
        let Some(mut columns) = rows.maybe_first_row::<ColumnIterator>().map_err(corrupt)? else {
            return Ok(None);
        };
        for _ in table.clustering {
            columns.next().ok_or_else(|| StoreError::Corrupt(format!("{}: a column is missing", table.name)))?.map_err(corrupt)?;
        }
        let body = next_value::<Option<&str>>(table, &mut columns)?;
        let expires_at = next_value::<Option<i64>>(table, &mut columns)?;
        // Absent: expired by this process's clock, or a body cell deleted under a key.
        Ok(body.filter(|_| expires_at.is_none_or(|expires_at| expires_at > now)).map(str::to_string))
    }

    /// For a table of one clustering column, one request a [`GET_MANY_KEYS`] keys
    /// (`<column> IN ?`: one read of the partition, however many keys); by key otherwise.
    async fn get_many(&self, table: &'static Table, partition: &[Val], keys: &[Vec<Val>]) -> Result<Vec<Option<Row>>, StoreError> {
        let [column] = table.clustering else { return recap_readmodel::driver::get_each(self, table, partition, keys).await };
        if keys.iter().any(|key| key.len() != 1) {
            return Err(StoreError::Misuse(format!("{}: get_many takes whole clustering keys", table.name)));
        }
        let statement =
            self.read_statement(ReadShape::GetMany { table: table.name }, table, || format!("{} AND {} IN ?", self.select(table, true), column.name)).await?;
        let now = now_micros();
        let mut found: Vec<Option<Row>> = vec![None; keys.len()];
        for (chunk, keys) in keys.chunks(GET_MANY_KEYS).enumerate() {
            let (texts, numbers): (Vec<&str>, Vec<i64>) = match column.kind {
                ColumnType::Text => (keys.iter().map(|key| key[0].as_text().unwrap_or_default()).collect(), Vec::new()),
                ColumnType::BigInt => (Vec::new(), keys.iter().map(|key| key[0].as_int().unwrap_or_default()).collect()),
            };
            let mut values: Vec<&(dyn SerializeValue + Sync)> = partition.iter().map(bound_value).collect();
            values.push(match column.kind {
                ColumnType::Text => &texts,
                ColumnType::BigInt => &numbers,
            });
            let result = self.session.execute_unpaged(&statement, values).await.map_err(unavailable)?;
            let rows = result.into_rows_result().map_err(corrupt)?;
            for row in rows.rows::<CqlRow>().map_err(corrupt)? {
                let Ok(row) = Self::to_row(table, row.map_err(corrupt)?, now)? else { continue };
                // A key asked for twice is answered once: each asking gets the row.
                let at: Vec<usize> =
                    keys.iter().enumerate().filter(|(_, key)| key[0] == row.clustering[0]).map(|(index, _)| chunk * GET_MANY_KEYS + index).collect();
                if let Some((last, rest)) = at.split_last() {
                    for index in rest {
                        found[*index] = Some(row.clone());
                    }
                    found[*last] = Some(row);
                }
            }
        }
        Ok(found)
    }

    async fn scan(&self, table: &'static Table, partition: &[Val], range: &ScanRange, limit: usize) -> Result<Vec<Row>, StoreError> {
        let now = now_micros();
        let mut found = Vec::new();
        let mut range = range.clone();
        while found.len() < limit {
            let wanted = limit - found.len();
            let (rows, read, last_key) = self.scan_once(table, partition, &range, wanted, now).await?;
            found.extend(rows);
            // CQL's LIMIT counts rows this process then drops (expired by its clock a
            // moment before the store's TTL removes them): when the store gave all it was
            // asked for, the range may hold more live rows past the last one read.
            match last_key {
                Some(key) if read == wanted && found.len() < limit => range.start = Bound::Excluded(key),
                _ => break,
            }
        }
        Ok(found)
    }

    /// Bodies are copied from the response frames into `out`: no row, string or value
    /// is built per body, and only clustering keys are decoded (into reused buffers).
    async fn scan_bodies(
        &self,
        table: &'static Table,
        partition: &[Val],
        range: &ScanRange,
        skip: usize,
        limit: usize,
        out: &mut Vec<u8>,
    ) -> Result<BodiesPage, StoreError> {
        let now = now_micros();
        let mut range = range.clone();
        let mut builder = PageBuilder::new(out, skip, limit);
        // The key of the row being read, and of the last body appended.
        let (mut key, mut last_key) = (Vec::with_capacity(table.clustering.len()), None);
        loop {
            let wanted = builder.wanted();
            let read = self
                // The body's write time is not read: a page of bodies does not return it.
                .select_rows(table, partition, &range, wanted, false, |mut columns| {
                    read_key(table, &mut columns, &mut key)?;
                    let body = next_value::<Option<&str>>(table, &mut columns)?;
                    let expires_at = next_value::<Option<i64>>(table, &mut columns)?;
                    // Absent: expired by this process's clock, or a body cell deleted under a key.
                    let Some(body) = body.filter(|_| expires_at.is_none_or(|expires_at| expires_at > now)) else {
                        return Ok(ControlFlow::Continue(()));
                    };
                    Ok(match builder.offer(body.as_bytes()) {
                        Offered::Skipped => ControlFlow::Continue(()),
                        Offered::Appended => {
                            copy_key(&key, last_key.get_or_insert_with(Vec::new));
                            ControlFlow::Continue(())
                        }
                        Offered::Full => ControlFlow::Break(()),
                    })
                })
                .await?;
            // As in `scan`: CQL's LIMIT counted rows dropped here, so a full answer may
            // leave live rows past the last one read.
            if builder.has_more() || read < wanted {
                break;
            }
            range.start = Bound::Excluded(key.clone());
        }
        Ok(builder.finish(last_key))
    }

    async fn write(&self, mutations: Vec<Mutation>) -> Result<(), StoreError> {
        for mutation in &mutations {
            check_plain_write(mutation.table)?;
        }
        stream::iter(write_groups(&mutations).into_iter().map(Ok::<_, StoreError>))
            .try_for_each_concurrent(self.config.write_concurrency, |group| async move {
                match group.as_slice() {
                    [mutation] => self.write_one(mutation).await,
                    group => self.write_batch(group).await,
                }
            })
            .await
    }

    async fn insert_if_absent(
        &self,
        table: &'static Table,
        partition: &[Val],
        clustering: &[Val],
        body: &str,
        expires_at: Option<i64>,
    ) -> Result<bool, StoreError> {
        check_conditional_write(table)?;
        let mut columns: Vec<&str> = table.partition.iter().map(|column| column.name).chain(table.clustering.iter().map(|column| column.name)).collect();
        let mut values: Vec<CqlValue> = partition.iter().chain(clustering).map(cql_value).collect();
        columns.push("body");
        values.push(CqlValue::Text(body.to_string()));
        if let Some(expires_at) = expires_at {
            columns.push("expires_at");
            values.push(CqlValue::BigInt(expires_at));
        }
        let markers = vec!["?"; columns.len()].join(", ");
        let mut cql = format!("INSERT INTO {} ({}) VALUES ({markers}) IF NOT EXISTS", self.qualified(table), columns.join(", "));
        if let Some(expires_at) = expires_at {
            cql.push_str(" USING TTL ?");
            values.push(CqlValue::Int(ttl_seconds(expires_at)));
        }
        let statement = self.prepared(cql, Access::ConditionalInsert).await?;
        // Looked at again when a held row that had expired could not be replaced: either
        // another call replaced it (the next look finds that call's live row), or CQL
        // dropped it meanwhile (the next insert finds the key free). Bounded, as every
        // look costs a Paxos round; a call that keeps meeting expired rows is told no.
        for _ in 0..3 {
            let result = self.session.execute_unpaged(&statement, &values).await.map_err(unavailable)?;
            match conditional_outcome(table, result)? {
                Conditional::Applied => return Ok(true),
                // The key holds a row that has expired by `expires_at` but not yet by its
                // TTL, which outlives it: it is replaced if it is still that very row.
                Conditional::Held { expires_at: Some(held) } if held <= now_micros() => {
                    if self.replace_expired(table, partition, clustering, body, expires_at, held).await? {
                        return Ok(true);
                    }
                }
                Conditional::Held { .. } => return Ok(false),
            }
        }
        Ok(false)
    }

    /// The first [`HOLDS_ROWS_READ`] rows of the whole table in token order, in one
    /// request (the coordinator reads the token ranges until it has them, or the ranges
    /// run out); true when one is live by this process's clock, or when that many were
    /// read and none is.
    async fn holds_rows(&self, table: &'static Table) -> Result<bool, StoreError> {
        let cql = format!("SELECT expires_at FROM {} LIMIT {HOLDS_ROWS_READ}", self.qualified(table));
        let statement = self.prepared(cql, Access::Plain).await?;
        let result = self.session.execute_unpaged(&statement, ()).await.map_err(unavailable)?;
        let rows = result.into_rows_result().map_err(corrupt)?;
        let now = now_micros();
        let mut read = 0;
        for row in rows.rows::<(Option<i64>,)>().map_err(corrupt)? {
            let (expires_at,) = row.map_err(corrupt)?;
            read += 1;
            if expires_at.is_none_or(|expires_at| expires_at > now) {
                return Ok(true);
            }
        }
        Ok(read >= HOLDS_ROWS_READ)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        let statement = self.prepared("SELECT release_version FROM system.local".into(), Access::Plain).await?;
        self.session.execute_unpaged(&statement, ()).await.map(|_| ()).map_err(unavailable)
    }

    fn timeout(&self) -> Duration {
        self.config.timeout
    }
}

/// The CQL TTL of a row that expires at `expires_at` (µs): long enough that CQL keeps it
/// at least until then, as reads and lightweight transactions need. CQL counts a TTL
/// from the start of the whole second the row was written in, so a TTL rounded down
/// could drop a row up to two seconds before its `expires_at`: an OAuth code redeemed
/// in its last seconds would read as unknown, and a conditional insert (which decides
/// by whether CQL still holds a row) could win over a row that had not expired. Rounded
/// up, plus that second. Reads check `expires_at` itself, so the second or two CQL keeps
/// a row past it are never seen, and a conditional row held past it is replaced by
/// [`ScyllaDriver::replace_expired`].
fn ttl_seconds(expires_at: i64) -> i32 {
    ((expires_at - now_micros()).max(0) as u64).div_ceil(1_000_000).saturating_add(1).min(i32::MAX as u64) as i32
}

/// What a lightweight transaction answered.
enum Conditional {
    Applied,
    /// Not applied: the key holds a row, whose `expires_at` came back beside `[applied]`.
    Held {
        expires_at: Option<i64>,
    },
}

/// Reads a lightweight transaction's one row: `[applied]` first and, when it was not
/// applied, the row the key holds.
fn conditional_outcome(table: &Table, result: QueryResult) -> Result<Conditional, StoreError> {
    let rows = result.into_rows_result().map_err(corrupt)?;
    let expires_column = rows.column_specs().iter().position(|spec| spec.name() == "expires_at");
    let row = rows.maybe_first_row::<CqlRow>().map_err(corrupt)?;
    let mut columns = row.map(|row| row.columns).unwrap_or_default();
    match columns.first().cloned().flatten() {
        Some(CqlValue::Boolean(true)) => Ok(Conditional::Applied),
        Some(CqlValue::Boolean(false)) => {
            let expires_at = match expires_column.and_then(|index| columns.get_mut(index)).and_then(Option::take) {
                Some(CqlValue::BigInt(expires_at)) => Some(expires_at),
                _ => None,
            };
            Ok(Conditional::Held { expires_at })
        }
        other => Err(StoreError::Corrupt(format!("{}: a conditional write answered {other:?} for [applied]", table.name))),
    }
}

/// Keys a request of [`Driver::get_many`] names at most.
const GET_MANY_KEYS: usize = 100;

/// Rows [`Driver::holds_rows`] reads before it gives up on finding a live one and
/// says true.
const HOLDS_ROWS_READ: usize = 100;

/// Rows per page of a paged read.
const PAGE_ROWS: i32 = 1_000;

/// Gives the rows of one response to `visit`, counting them in `read`, until `visit`
/// breaks (then Break).
fn visit_rows<F>(result: QueryResult, read: &mut usize, visit: &mut F) -> Result<ControlFlow<()>, StoreError>
where
    F: for<'frame> FnMut(ColumnIterator<'frame, 'frame>) -> Result<ControlFlow<()>, StoreError>,
{
    let rows = result.into_rows_result().map_err(corrupt)?;
    for row in rows.rows::<ColumnIterator>().map_err(corrupt)? {
        *read += 1;
        if visit(row.map_err(corrupt)?)?.is_break() {
            return Ok(ControlFlow::Break(()));
        }
    }
    Ok(ControlFlow::Continue(()))
}

impl ScyllaDriver {
    /// One SELECT of up to `limit` rows, paged through: each row goes to `visit` as it
    /// comes off the frame (nothing is copied unless `visit` copies it), until `visit`
    /// breaks or the rows run out. Returns how many rows were read.
    async fn select_rows<F>(
        &self,
        table: &'static Table,
        partition: &[Val],
        range: &ScanRange,
        limit: usize,
        write_time: bool,
        mut visit: F,
    ) -> Result<usize, StoreError>
    where
        F: for<'frame> FnMut(ColumnIterator<'frame, 'frame>) -> Result<ControlFlow<()>, StoreError>,
    {
        let (start, end, limited) = (bound_shape(&range.start), bound_shape(&range.end), limit < i32::MAX as usize);
        let shape = ReadShape::Scan { table: table.name, start, end, limited, write_time };
        let statement = self
            .read_statement(shape, table, || {
                let mut cql = self.select(table, write_time);
                slice_clause(table, start, true, &mut cql);
                slice_clause(table, end, false, &mut cql);
                if limited {
                    cql.push_str(" LIMIT ?");
                }
                cql
            })
            .await?;
        let limit_value = limit as i32;
        let mut values: Vec<&(dyn SerializeValue + Sync)> = partition.iter().map(bound_value).collect();
        if start.is_some() {
            slice_values(&range.start, &mut values);
        }
        if end.is_some() {
            slice_values(&range.end, &mut values);
        }
        if limited {
            values.push(&limit_value);
        }
        let mut read = 0;
        // A LIMIT that fits in one page is read in one unpaged request: the same rows,
        // without the coordinator's paging state.
        if limit <= PAGE_ROWS as usize {
            let result = self.session.execute_unpaged(&statement, &values).await.map_err(unavailable)?;
            // The one response holds every row asked for: nothing follows a break.
            let _ = visit_rows(result, &mut read, &mut visit)?;
            return Ok(read);
        }
        let mut paging = PagingState::start();
        loop {
            let (result, next) = self.session.execute_single_page(&statement, &values, paging).await.map_err(unavailable)?;
            if visit_rows(result, &mut read, &mut visit)?.is_break() {
                return Ok(read);
            }
            match next.into_paging_control_flow() {
                ControlFlow::Continue(state) => paging = state,
                ControlFlow::Break(()) => return Ok(read),
            }
        }
    }

    /// One SELECT of up to `limit` rows: the live rows, how many rows the store
    /// returned, and the clustering key of the last of them.
    async fn scan_once(
        &self,
        table: &'static Table,
        partition: &[Val],
        range: &ScanRange,
        limit: usize,
        now: i64,
    ) -> Result<(Vec<Row>, usize, Option<Vec<Val>>), StoreError> {
        let (mut found, mut dropped_last) = (Vec::<Row>::new(), None);
        let read = self
            .select_rows(table, partition, range, limit, true, |columns| {
                let row = CqlRow::deserialize(columns).map_err(corrupt)?;
                match Self::to_row(table, row, now)? {
                    Ok(row) => {
                        dropped_last = None;
                        found.push(row);
                    }
                    Err(key) => dropped_last = Some(key),
                }
                Ok(if found.len() >= limit { ControlFlow::Break(()) } else { ControlFlow::Continue(()) })
            })
            .await?;
        let last_key = dropped_last.or_else(|| found.last().map(|row| row.clustering.clone()));
        Ok((found, read, last_key))
    }
}

/// The next column of a row, deserialized (borrowing from the frame where `T` does).
fn next_value<'frame, T: DeserializeValue<'frame, 'frame>>(table: &Table, columns: &mut ColumnIterator<'frame, 'frame>) -> Result<T, StoreError> {
    let corrupt = |error: &dyn std::fmt::Display| StoreError::Corrupt(format!("{}: {error}", table.name));
    let column = columns.next().ok_or_else(|| corrupt(&"a column is missing"))?.map_err(|error| corrupt(&error))?;
    T::type_check(column.spec.typ()).map_err(|error| corrupt(&error))?;
    T::deserialize(column.spec.typ(), column.slice).map_err(|error| corrupt(&error))
}

/// Reads a row's clustering columns into `key`, reusing its strings.
fn read_key<'frame>(table: &Table, columns: &mut ColumnIterator<'frame, 'frame>, key: &mut Vec<Val>) -> Result<(), StoreError> {
    key.truncate(table.clustering.len());
    for (index, column) in table.clustering.iter().enumerate() {
        match column.kind {
            ColumnType::BigInt => {
                let value = Val::Int(next_value::<i64>(table, columns)?);
                match key.get_mut(index) {
                    Some(slot) => *slot = value,
                    None => key.push(value),
                }
            }
            ColumnType::Text => assign_text(key, index, next_value::<&str>(table, columns)?),
        }
    }
    Ok(())
}

fn assign_text(key: &mut Vec<Val>, index: usize, text: &str) {
    match key.get_mut(index) {
        Some(Val::Text(slot)) => {
            slot.clear();
            slot.push_str(text);
        }
        Some(slot) => *slot = Val::text(text),
        None => key.push(Val::text(text)),
    }
}

/// `to = from`, reusing `to`'s strings.
fn copy_key(from: &[Val], to: &mut Vec<Val>) {
    to.truncate(from.len());
    for (index, value) in from.iter().enumerate() {
        match value {
            Val::Text(text) => assign_text(to, index, text),
            Val::Int(number) => match to.get_mut(index) {
                Some(slot) => *slot = Val::Int(*number),
                None => to.push(Val::Int(*number)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The store `make up` started (`RECAP_SCYLLA_NODES`), with its login
    /// (`RECAP_SCYLLA_USERNAME`, `RECAP_SCYLLA_PASSWORD`) when it asks for one.
    fn test_cluster() -> ScyllaCluster {
        let setting = |key: &str, default: &str| std::env::var(key).unwrap_or_else(|_| default.to_owned());
        ScyllaCluster::from_settings(
            &setting("RECAP_SCYLLA_NODES", "127.0.0.1:9042"),
            &setting("RECAP_SCYLLA_USERNAME", ""),
            &setting("RECAP_SCYLLA_PASSWORD", ""),
        )
    }

    #[test]
    fn a_rows_ttl_outlives_its_expiry_by_cqls_whole_seconds() {
        // CQL counts a TTL of n from the start of the second the row is written in, so
        // the row lives more than n - 1 seconds: n must pass the expiry by over a second.
        let now = now_micros();
        for (left, at_least) in [(1_200_000, 3), (2_000_000, 3), (600_000_000, 601), (0, 1), (-5_000_000, 1)] {
            let ttl = ttl_seconds(now + left);
            assert!(ttl >= at_least && ttl <= at_least + 1, "{left} µs left: TTL {ttl}");
            assert!(i64::from(ttl - 1) * 1_000_000 >= left, "{left} µs left: TTL {ttl} may end before the expiry");
        }
        assert_eq!(ttl_seconds(i64::MAX), i32::MAX);
    }

    #[test]
    fn lightweight_transactions_stay_in_the_datacenter_only_when_the_consistency_does() {
        assert_eq!(serial_consistency_for(Consistency::LocalQuorum), SerialConsistency::LocalSerial);
        assert_eq!(serial_consistency_for(Consistency::LocalOne), SerialConsistency::LocalSerial);
        for consistency in [Consistency::Quorum, Consistency::One, Consistency::All, Consistency::EachQuorum] {
            assert_eq!(serial_consistency_for(consistency), SerialConsistency::Serial, "{consistency:?}");
        }
    }

    fn row(table: &'static Table, account: &str, created: i64, body: &str) -> Mutation {
        let clustering = if table.clustering.len() == 2 { vec![Val::Int(created), Val::text("m")] } else { vec![Val::text(created.to_string())] };
        Mutation { table, partition: vec![Val::text(account)], clustering, op: Op::Put { body: body.into(), expires_at: None }, ts: 1 }
    }

    /// Which rows a group holds, as (account, created) of the meetings' rows.
    fn keys(groups: &[Vec<&Mutation>]) -> Vec<Vec<String>> {
        groups.iter().map(|group| group.iter().map(|mutation| format!("{:?}/{:?}", mutation.partition[0], mutation.clustering[0])).collect()).collect()
    }

    #[test]
    fn rows_of_one_partition_key_go_together_in_the_order_they_first_appear_across_tables() {
        use recap_readmodel::tables::{MEETINGS_BY_ACCOUNT, TEAMS_BY_ACCOUNT};
        let writes = vec![
            row(&MEETINGS_BY_ACCOUNT, "a", 1, "{}"),
            row(&MEETINGS_BY_ACCOUNT, "b", 2, "{}"),
            row(&TEAMS_BY_ACCOUNT, "a", 3, "{}"),
            Mutation { op: Op::Delete, ..row(&MEETINGS_BY_ACCOUNT, "a", 4, "") },
            row(&MEETINGS_BY_ACCOUNT, "c", 5, "{}"),
        ];
        let groups = write_groups(&writes);
        assert_eq!(
            keys(&groups),
            vec![vec![r#"Text("a")/Int(1)"#, r#"Text("a")/Text("3")"#, r#"Text("a")/Int(4)"#], vec![r#"Text("b")/Int(2)"#], vec![r#"Text("c")/Int(5)"#]]
        );
        assert!(write_groups(&[]).is_empty(), "no rows, no request");
    }

    #[test]
    fn a_group_closes_at_its_rows_and_at_its_bytes() {
        use recap_readmodel::tables::MEETINGS_BY_ACCOUNT;
        let small: Vec<Mutation> = (0..2 * BATCH_ROWS as i64 + 1).map(|created| row(&MEETINGS_BY_ACCOUNT, "a", created, "{}")).collect();
        let sizes: Vec<usize> = write_groups(&small).iter().map(Vec::len).collect();
        assert_eq!(sizes, vec![BATCH_ROWS, BATCH_ROWS, 1]);

        let body = "x".repeat(BATCH_BYTES / 4);
        let large: Vec<Mutation> = (0..9).map(|created| row(&MEETINGS_BY_ACCOUNT, "a", created, &body)).collect();
        let groups = write_groups(&large);
        for group in &groups {
            assert!(group.iter().map(|mutation| write_bytes(mutation)).sum::<usize>() <= BATCH_BYTES);
        }
        assert_eq!(groups.iter().map(Vec::len).collect::<Vec<_>>(), vec![3, 3, 3], "a quarter of the bound and its keys: three rows a request");

        let huge = vec![row(&MEETINGS_BY_ACCOUNT, "a", 1, &"x".repeat(2 * BATCH_BYTES)), row(&MEETINGS_BY_ACCOUNT, "a", 2, "{}")];
        assert_eq!(write_groups(&huge).iter().map(Vec::len).collect::<Vec<_>>(), vec![1, 1], "a row over the bound goes alone");
    }

    /// What else the cluster holds (other applications' keyspaces, other test runs') is
    /// not in a session's metadata, nor are the columns of its own tables, however often
    /// the driver refreshes it: a process's memory does not follow the cluster's schema.
    #[tokio::test]
    #[ignore = "needs the real engines: `make up` (make test runs it)"]
    async fn a_session_holds_the_metadata_of_its_own_keyspace_only_and_no_columns() {
        let nodes = test_cluster();
        let micros = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|since| since.as_micros()).unwrap_or_default();
        // Named as test runs name what they create, so that `make up` drops it if this run dies.
        let run = format!("t{}_{}", std::process::id(), micros % 1_000_000_000);
        let (own, other) = (format!("recap_{run}_own"), format!("recap_{run}_other"));
        let timeout = Duration::from_secs(30);
        let replication = "{'class': 'SimpleStrategy', 'replication_factor': 1}";
        for keyspace in [&own, &other] {
            ScyllaDriver::migrate(&nodes, keyspace, replication, recap_readmodel::tables::ALL, timeout).await.expect("migrate (are the engines up? `make up`)");
        }
        let config = ScyllaConfig { cluster: nodes.clone(), keyspace: own.clone(), consistency: Consistency::LocalQuorum, timeout, write_concurrency: 8 };
        let driver = ScyllaDriver::connect(config).await.expect("connect");
        driver.session.refresh_metadata().await.expect("refresh the metadata");
        let state = driver.session.get_cluster_state();
        let known: Vec<&str> = state.keyspaces_iter().map(|(name, _)| name).collect();
        assert_eq!(known, [own.as_str()], "the keyspaces in the session's metadata");
        let tables = &state.get_keyspace(&own).expect("its own keyspace").tables;
        let with_columns: Vec<&String> = tables.iter().filter(|(_, table)| !table.columns.is_empty()).map(|(name, _)| name).collect();
        assert!(with_columns.is_empty(), "tables whose columns the session holds: {with_columns:?}");
        for keyspace in [&own, &other] {
            ScyllaDriver::drop_keyspace(&nodes, keyspace, timeout).await.expect("drop the keyspace");
        }
    }

    #[test]
    fn only_plain_keyspace_names_are_put_into_statements() {
        assert!(keyspace_name_valid("recap"));
        assert!(keyspace_name_valid("recap_t_mcp_0a1b2c3d_0"));
        for name in ["", "recap.other", "recap; DROP KEYSPACE x", "\"Recap\"", &"k".repeat(49)] {
            assert!(!keyspace_name_valid(name), "{name:?}");
        }
    }
}
