//! The statements the server understands, as parsed.

use super::values::CqlType;

/// A table reference, `keyspace.table`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRef {
    /// Keyspace, when written.
    pub keyspace: Option<String>,
    /// Table.
    pub table: String,
}

/// A value in a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Term {
    /// `?`, numbered from 0 in order of appearance.
    Marker(usize),
    /// `'text'`
    Str(String),
    /// A number as written.
    Num(String),
    /// `true` / `false`
    Bool(bool),
    /// `null`
    Null,
}

/// A comparison operator in a condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `=`
    Eq,
    /// `!=`
    Neq,
    /// `<`
    Lt,
    /// `<=`
    Lte,
    /// `>`
    Gt,
    /// `>=`
    Gte,
}

/// A condition of an LWT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Condition {
    /// `col op term`
    Compare(String, Op, Term),
    /// `col IN (terms)`
    In(String, Vec<Term>),
}

/// The `IF` clause of a modification.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Conditions {
    /// Not an LWT.
    #[default]
    None,
    /// `IF EXISTS`
    Exists,
    /// `IF NOT EXISTS`
    NotExists,
    /// `IF c AND c ...`
    Columns(Vec<Condition>),
}

/// A relation of a `WHERE` clause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    /// The column.
    pub column: String,
    /// The operator (`Eq` for `IN`, with several terms).
    pub op: Op,
    /// One term, or the terms of `IN (...)`.
    pub terms: Vec<Term>,
    /// Written as `IN`.
    pub is_in: bool,
}

/// A selected expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// A column.
    Column(String),
    /// `TTL(col)`
    Ttl(String),
    /// `WRITETIME(col)`
    WriteTime(String),
}

/// `USING TTL ... AND TIMESTAMP ...`
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Using {
    /// TTL term.
    pub ttl: Option<Term>,
    /// Timestamp term.
    pub timestamp: Option<Term>,
}

/// A parsed statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Statement {
    /// `SELECT`
    Select {
        /// Selected expressions; empty for `*`.
        selectors: Vec<Selector>,
        /// From.
        table: TableRef,
        /// `WHERE` relations.
        relations: Vec<Relation>,
        /// `ORDER BY <first clustering column> DESC` (`Some(false)` for `ASC`).
        order_desc: Option<bool>,
        /// `LIMIT`
        limit: Option<Term>,
    },
    /// `UPDATE`
    Update {
        /// Table.
        table: TableRef,
        /// USING clause.
        using: Using,
        /// `SET col = term`
        assignments: Vec<(String, Term)>,
        /// WHERE.
        relations: Vec<Relation>,
        /// IF.
        conditions: Conditions,
    },
    /// `INSERT`
    Insert {
        /// Table.
        table: TableRef,
        /// Columns and values.
        assignments: Vec<(String, Term)>,
        /// USING clause.
        using: Using,
        /// `IF NOT EXISTS` or none.
        conditions: Conditions,
    },
    /// `DELETE`
    Delete {
        /// Deleted columns; empty for the whole row.
        columns: Vec<String>,
        /// Table.
        table: TableRef,
        /// USING clause (timestamp only).
        using: Using,
        /// WHERE.
        relations: Vec<Relation>,
        /// IF.
        conditions: Conditions,
    },
    /// `CREATE KEYSPACE`
    CreateKeyspace {
        /// Name.
        name: String,
        /// IF NOT EXISTS.
        if_not_exists: bool,
        /// The replication map.
        replication: Vec<(String, String)>,
        /// `AND tablets = {'enabled': ...}` (ScyllaDB).
        tablets: Option<bool>,
    },
    /// `CREATE TABLE`
    CreateTable {
        /// Name.
        table: TableRef,
        /// IF NOT EXISTS.
        if_not_exists: bool,
        /// Columns.
        columns: Vec<(String, CqlType)>,
        /// Partition key column.
        partition_key: String,
        /// Clustering columns, `true` when `DESC`.
        clustering: Vec<(String, bool)>,
        /// Static columns.
        statics: Vec<String>,
        /// `gc_grace_seconds`, when given.
        gc_grace: Option<i64>,
        /// `default_time_to_live`, seconds.
        default_ttl: i32,
    },
    /// `USE ks`
    Use(String),
}
