//! Wide-column table definitions: the one description of every read-model table that
//! both drivers map, the embedded driver to ordered byte keys and the ScyllaDB driver to
//! CQL tables (`schemas/cql/`, generated from these definitions and checked by a test).
//!
//! A table has text or bigint partition columns, clustering columns each with a
//! direction, and one `body` column holding what the endpoint renders, ready to send.

use std::cmp::Ordering;
use std::fmt::Write as _;

/// A key column's value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum Val {
    Text(String),
    Int(i64),
}

impl Val {
    pub fn text(value: impl Into<String>) -> Val {
        Val::Text(value.into())
    }

    pub fn as_text(&self) -> Option<&str> {
        match self {
            Val::Text(text) => Some(text),
            Val::Int(_) => None,
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Val::Int(value) => Some(*value),
            Val::Text(_) => None,
        }
    }
}

impl From<&str> for Val {
    fn from(value: &str) -> Val {
        Val::Text(value.to_string())
    }
}

impl From<String> for Val {
    fn from(value: String) -> Val {
        Val::Text(value)
    }
}

impl From<&String> for Val {
    fn from(value: &String) -> Val {
        Val::Text(value.clone())
    }
}

impl From<i64> for Val {
    fn from(value: i64) -> Val {
        Val::Int(value)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnType {
    Text,
    BigInt,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    Asc,
    Desc,
}

#[derive(Clone, Copy, Debug)]
pub struct Column {
    pub name: &'static str,
    pub kind: ColumnType,
}

#[derive(Clone, Copy, Debug)]
pub struct Clustering {
    pub name: &'static str,
    pub kind: ColumnType,
    pub order: Order,
}

/// How a table's writes are timestamped (the LWW clock of both drivers), or that they
/// are not: a [`Clock::FirstWriteWins`] table is written only conditionally.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// Rows owned by one entity: the timestamp is the entity's event version.
    Version,
    /// Rows derived from several entities (visibility fan-out): the timestamp is the
    /// position of the event in its stream partition, which every event that touches
    /// such a row shares (they all travel under one message key). The feed's rows and
    /// heads carry their seq, and the claims of `message_claims` a time that falls as
    /// their seq grows (`webhooks::claim_clock`).
    Position,
    /// Rows written by the service itself (OAuth state): wall-clock microseconds.
    Wall,
    /// Rows written only by [`crate::Driver::insert_if_absent`]: the first write of a
    /// key stands until the row expires, whatever the clocks of the writers; no plain
    /// write or delete ever touches them (the drivers refuse one).
    FirstWriteWins,
}

#[derive(Debug)]
pub struct Table {
    /// Stable small number: the embedded driver's key prefix. Never reuse one.
    pub id: u8,
    pub name: &'static str,
    pub doc: &'static str,
    pub partition: &'static [Column],
    pub clustering: &'static [Clustering],
    pub clock: Clock,
}

impl PartialEq for Table {
    fn eq(&self, other: &Table) -> bool {
        self.id == other.id
    }
}

impl Table {
    /// Compares two clustering keys in this table's clustering order.
    pub fn cmp_clustering(&self, left: &[Val], right: &[Val]) -> Ordering {
        for (index, column) in self.clustering.iter().enumerate() {
            let ordering = match (left.get(index), right.get(index)) {
                (Some(a), Some(b)) => a.cmp(b),
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Less,
                (Some(_), None) => Ordering::Greater,
            };
            let ordering = if column.order == Order::Desc { ordering.reverse() } else { ordering };
            if ordering != Ordering::Equal {
                return ordering;
            }
        }
        Ordering::Equal
    }

    /// This table's entry of `schemas/cql/recap.cql`: its doc comment and its
    /// [`Table::create_statement`].
    pub fn cql(&self) -> String {
        format!("-- {}\n{};\n", self.doc, self.create_statement())
    }

    /// The CQL statement creating this table (valid on ScyllaDB and Cassandra 5), in
    /// the session's keyspace (as `schemas/cql/recap.cql` shows it).
    pub fn create_statement(&self) -> String {
        self.create_statement_named(self.name)
    }

    /// [`Table::create_statement`] in `keyspace`, named `keyspace.table`: drivers name
    /// the keyspace in every statement rather than setting one for the session.
    pub fn create_statement_in(&self, keyspace: &str) -> String {
        self.create_statement_named(&format!("{keyspace}.{}", self.name))
    }

    fn create_statement_named(&self, name: &str) -> String {
        let mut cql = String::new();
        let _ = writeln!(cql, "CREATE TABLE IF NOT EXISTS {name} (");
        for column in self.partition {
            let _ = writeln!(cql, "    {} {},", column.name, cql_type(column.kind));
        }
        for column in self.clustering {
            let _ = writeln!(cql, "    {} {},", column.name, cql_type(column.kind));
        }
        let _ = writeln!(cql, "    body text,");
        let _ = writeln!(cql, "    expires_at bigint,");
        let partition: Vec<&str> = self.partition.iter().map(|column| column.name).collect();
        let mut primary = format!("({})", partition.join(", "));
        for column in self.clustering {
            primary.push_str(", ");
            primary.push_str(column.name);
        }
        let _ = write!(cql, "    PRIMARY KEY ({primary})\n)");
        if !self.clustering.is_empty() {
            let order: Vec<String> =
                self.clustering.iter().map(|column| format!("{} {}", column.name, if column.order == Order::Desc { "DESC" } else { "ASC" })).collect();
            let _ = write!(cql, " WITH CLUSTERING ORDER BY ({})", order.join(", "));
        }
        cql
    }
}

/// The CQL type of a key column.
pub fn cql_type(kind: ColumnType) -> &'static str {
    match kind {
        ColumnType::Text => "text",
        ColumnType::BigInt => "bigint",
    }
}
