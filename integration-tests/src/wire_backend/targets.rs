//! How the suite's store operations and faults map onto the CQL test server: the labels it
//! counts and targets requests by, the statements it is taught (from the golden lists), and
//! the fault targets of each operation.

use cql_lease::memory::{Fault, Op, Times};
use cql_test_server::{CqlTestServer, Target, WireFault};
use cql_workqueue::memory::QueueOp;

use cql_lease::cells::scylla as cells;
use cql_lease::scylla::WAITING_SUFFIX;
use cql_lease::scylla::cql;

use crate::golden;

/// The label the CQL test server counts and targets a lease operation by.
pub fn op_label(op: Op) -> &'static str {
    match op {
        Op::TryAcquire => "lease.try_acquire",
        Op::Renew => "lease.renew",
        Op::Release => "lease.release",
        Op::Read => "lease.read",
        Op::Peek => "lease.peek",
    }
}

/// Teaches `server` every statement of the lease backend for `keyspace.table`, from the
/// golden list (not from the backend's own `cql::ALL`).
pub fn register_lease(server: &CqlTestServer, keyspace: &str, table: &str) {
    for (label, template) in golden::LEASE {
        let rendered = cql::render(template, keyspace, table);
        match rendered.split_once(cql::REPLICATION) {
            Some((prefix, _)) => server.register_prefix(label, prefix),
            None => server.register(label, &rendered),
        }
    }
    let waiting = format!("{table}{WAITING_SUFFIX}");
    for (label, template) in WAITING_STATEMENTS {
        server.register(label, &cql::render(template, keyspace, &waiting));
    }
}

/// The statements of a lease table's waiting line (plain cells), with the labels the
/// server counts them under.
pub const WAITING_STATEMENTS: [(&str, &str); 5] = [
    ("waiting.schema", cells::CREATE_TABLE),
    ("waiting.write", cells::WRITE),
    ("waiting.delete", cells::DELETE),
    ("waiting.read_row", cells::READ_ROW),
    ("waiting.read_cell", cells::READ_CELL),
];

/// The server's fault for a store fault.
pub fn wire_fault(f: Fault) -> WireFault {
    match f {
        Fault::Latency(d) => WireFault::Latency(d),
        // The test server's delays are fixed per rule: a random one becomes its mean.
        Fault::LatencyUpTo(d) => WireFault::Latency(d / 2),
        Fault::Unavailable => WireFault::Unavailable,
        Fault::TimeoutAfterApply => WireFault::CasTimeoutAfterApply,
        Fault::TimeoutWithoutApply => WireFault::CasTimeoutWithoutApply,
    }
}

/// The server's count for a store count.
pub fn wire_times(t: Times) -> cql_test_server::Times {
    match t {
        Times::Always => cql_test_server::Times::Always,
        Times::Next(n) => cql_test_server::Times::Next(n),
        Times::Random(p) => cql_test_server::Times::Random(p),
    }
}

/// The requests of `ops`' labels (all of `all` when `None`).
pub fn target(op: Option<&'static str>, all: &[&'static str]) -> Target {
    match op {
        Some(label) => Target::Label(label.into()),
        None => Target::AnyLabel(all.iter().map(|l| (*l).to_owned()).collect()),
    }
}

/// The label the CQL test server counts and targets a work-queue operation by.
pub fn queue_label(op: QueueOp) -> &'static str {
    match op {
        QueueOp::Enqueue => "queue.enqueue",
        QueueOp::Revive => "queue.revive",
        QueueOp::Claim => "queue.claim",
        QueueOp::Heartbeat => "queue.heartbeat",
        QueueOp::Complete => "queue.complete",
        QueueOp::Reschedule => "queue.reschedule",
        QueueOp::Unclaim => "queue.unclaim",
        QueueOp::Read => "queue.read",
        QueueOp::Index => "queue.index",
    }
}

/// Teaches `server` every statement of the work-queue backend for `keyspace.table`, from
/// the golden list.
pub fn register_queue(server: &CqlTestServer, keyspace: &str, table: &str) {
    for (label, template) in golden::QUEUE {
        server.register(label, &cql::render(template, keyspace, table));
    }
    // The bakery mode's cells.
    crate::wire_lock_backend::register_cells(server, keyspace, &format!("{table}_cells"));
}

const QUEUE_OPS: [&str; 12] = [
    "queue.enqueue",
    "queue.revive",
    "queue.claim",
    "queue.heartbeat",
    "queue.complete",
    "queue.reschedule",
    "queue.unclaim",
    "queue.read",
    "queue.index",
    "queue.index_range",
    "queue.scan",
    "queue.index_read",
];

/// The target of `op`: the index fault covers scans and cursor reads too.
pub(super) fn queue_target(op: Option<QueueOp>) -> Target {
    match op {
        Some(QueueOp::Index) => Target::AnyLabel(
            [
                "queue.index",
                "queue.index_range",
                "queue.scan",
                "queue.index_read",
            ]
            .map(str::to_owned)
            .to_vec(),
        ),
        op => target(op.map(queue_label), &QUEUE_OPS),
    }
}

/// The bakery mode's statements doing `op`'s work (see `inject_bakery` in the backend
/// module): a claim writes cells, a finish writes the row, an undo deletes cells.
pub(super) fn bakery_target(op: Option<QueueOp>) -> Target {
    let labels: &[&str] = match op {
        None => &[
            "cells.write",
            "cells.delete",
            "cells.read_row",
            "cells.read_cell",
            "queue.plain_write",
            "queue.plain_read",
            "queue.index",
            "queue.index_range",
            "queue.scan",
            "queue.index_read",
        ],
        Some(QueueOp::Index) => &[
            "queue.index",
            "queue.index_range",
            "queue.scan",
            "queue.index_read",
        ],
        Some(QueueOp::Claim | QueueOp::Heartbeat) => &["cells.write"],
        Some(QueueOp::Unclaim) => &["cells.delete"],
        Some(QueueOp::Read) => &["queue.plain_read"],
        Some(QueueOp::Enqueue | QueueOp::Revive | QueueOp::Complete | QueueOp::Reschedule) => {
            &["queue.plain_write"]
        }
    };
    Target::AnyLabel(labels.iter().map(|l| (*l).to_owned()).collect())
}

pub(super) const LEASE_OPS: [&str; 5] = [
    "lease.try_acquire",
    "lease.renew",
    "lease.release",
    "lease.read",
    "lease.peek",
];
