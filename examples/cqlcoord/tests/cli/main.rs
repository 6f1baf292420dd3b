//! The `cqlcoord` binary, run as a process against the CQL test server started in-process.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test code: a panic is a failure

mod common;
mod dev;
mod elect;
mod etcdlike;
mod flags;
mod lock;
mod metrics;
mod namespaces;
mod paused;
mod queue;
mod secure;
mod trouble;
mod ui;
