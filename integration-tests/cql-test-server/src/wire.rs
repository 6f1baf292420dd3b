//! Requests in, responses out: the handler every proxy rule calls.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use scylla_cql::frame::response::error::DbError;
use scylla_proxy::{RequestFrame, RequestOpcode, ResponseFrame, ResponseOpcode};

use super::deferred::{self, Parked};
use super::engine::{DbErr, Engine};
use super::parser::{Statement, parse};
use super::paxos::Model;
use super::registry::{Needles, Registry};
use super::stats::{ConsistencyUse, PaxosTracker};
use super::values::push_string;

/// What the handler does with a request, beyond answering it.
#[derive(Debug, Clone)]
pub enum Reaction {
    /// Execute and answer.
    Normal,
    /// Answer with this error without executing.
    Fail(DbError),
    /// Execute, then answer with this error (the answer to the write is lost).
    ApplyThenFail(DbError),
    /// Break the connection without executing.
    Break,
    /// Execute, then break the connection before answering.
    ApplyThenBreak,
}

/// A prepared statement's text and parsed form.
pub(super) type Prepared = (std::sync::Arc<str>, std::sync::Arc<Statement>);

/// State shared by every rule of one server.
#[derive(Debug)]
pub struct Shared {
    /// The data.
    pub engine: Mutex<Engine>,
    /// Prepared statements by id: their text and parsed form, shared by every execution.
    pub(super) prepared: Mutex<HashMap<Vec<u8>, Prepared>>,
    strict: bool,
    registry: Mutex<Registry>,
    calls: Mutex<HashMap<String, u64>>,
    /// Statements refused as unknown, for diagnostics.
    pub refused: Mutex<Vec<String>>,
    /// Texts of the statements executed so far.
    pub executed: Mutex<std::collections::BTreeSet<String>>,
    /// Texts of the accepted statements received so far (prepared or run, even if they
    /// then failed).
    pub received: Mutex<std::collections::BTreeSet<String>>,
    /// Consistency levels of the requests executed so far.
    pub consistencies: Mutex<Vec<ConsistencyUse>>,
    /// Query, execute and batch requests answered so far, per node.
    pub per_node: Mutex<HashMap<usize, u64>>,
    /// Query, execute and batch requests a frozen node swallowed so far, per node.
    pub frozen_per_node: Mutex<HashMap<usize, u64>>,
    /// The engine's Paxos counts, read without the engine's lock.
    pub paxos: Arc<PaxosTracker>,
    /// The Paxos contention model, when on.
    pub(crate) model: Option<Model>,
    /// Answers of requests finished after their frame was answered with a marker.
    pub(crate) parked: Arc<Parked>,
}

impl Shared {
    /// State over `engine`.
    pub fn new(engine: Engine, strict: bool) -> Self {
        let paxos = Arc::clone(&engine.paxos);
        let model = Model::of(&engine.options, Arc::clone(&paxos));
        Shared {
            paxos,
            model,
            parked: Arc::default(),
            engine: Mutex::new(engine),
            prepared: Mutex::default(),
            strict,
            registry: Mutex::new(Registry::new()),
            calls: Mutex::default(),
            refused: Mutex::default(),
            executed: Mutex::default(),
            received: Mutex::default(),
            consistencies: Mutex::default(),
            per_node: Mutex::default(),
            frozen_per_node: Mutex::default(),
        }
    }

    /// Registers a statement (or prefix) under a label.
    pub fn register(&self, label: &str, text: &str, prefix: bool) {
        if let Ok(mut r) = self.registry.lock() {
            r.add(label, text, prefix);
        }
    }

    /// Requests counted under `label`.
    pub fn calls(&self, label: &str) -> u64 {
        self.calls
            .lock()
            .map(|c| c.get(label).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    /// What identifies the requests of `target`.
    pub fn needles(&self, target: &super::Target) -> Needles {
        self.registry
            .lock()
            .map(|r| r.needles(target))
            .unwrap_or_default()
    }

    /// Reads something off the engine.
    pub fn engine_stats<T: Default>(&self, f: impl FnOnce(&Engine) -> T) -> T {
        self.engine.lock().map(|e| f(&e)).unwrap_or_default()
    }

    pub(super) fn parse_known(&self, text: &str) -> Result<Statement, DbErr> {
        let known = self
            .registry
            .lock()
            .map(|r| r.label_of(text).is_some())
            .unwrap_or(false);
        if self.strict && !known {
            if let Ok(mut refused) = self.refused.lock() {
                refused.push(text.to_owned());
            }
            return Err(DbErr::invalid(format!(
                "the CQL test server does not know this statement (register it): {text}"
            )));
        }
        if let Ok(mut received) = self.received.lock() {
            received.insert(text.to_owned());
        }
        parse(text).map_err(|e| DbErr::syntax(format!("line 1: {e} (in: {text})")))
    }

    fn count(&self, id: &[u8], text: &str) {
        let label = self.registry.lock().ok().and_then(|r| {
            r.label_of_id(id)
                .or_else(|| r.label_of(text))
                .map(str::to_owned)
        });
        if let (Some(label), Ok(mut calls)) = (label, self.calls.lock()) {
            *calls.entry(label).or_default() += 1;
        }
    }
}

/// Answers one request frame that reached node `node`.
pub fn handle(
    shared: &Arc<Shared>,
    node: usize,
    frame: RequestFrame,
    reaction: &Reaction,
) -> ResponseFrame {
    let result = match frame.opcode {
        RequestOpcode::Options => {
            let options = HashMap::from([
                ("CQL_VERSION".to_owned(), vec!["3.4.5".to_owned()]),
                ("COMPRESSION".to_owned(), Vec::new()),
            ]);
            return ResponseFrame::forged_supported(frame.params, &options)
                .unwrap_or_else(|_| error_frame(&frame, &DbErr::invalid("options")));
        }
        RequestOpcode::Startup | RequestOpcode::Register => {
            return ResponseFrame::forged_ready(frame.params);
        }
        RequestOpcode::Prepare => super::prepare::prepare(shared, &frame),
        RequestOpcode::Query | RequestOpcode::Execute | RequestOpcode::Batch => {
            run(shared, node, &frame, reaction)
        }
        other => Err(DbErr {
            error: DbError::ProtocolError,
            message: format!("unsupported opcode {other:?}"),
        }),
    };
    answer_frame(&frame, result)
}

/// The response frame to `frame` carrying `result`.
pub(super) fn answer_frame(frame: &RequestFrame, result: Result<Answer, DbErr>) -> ResponseFrame {
    let params = frame.params;
    match result {
        Ok(Answer::Body(body, warnings)) if warnings.is_empty() => {
            ResponseFrame::new(params.for_response(), ResponseOpcode::Result, body.into())
        }
        Ok(Answer::Body(body, warnings)) => {
            // The WARNING flag, and the warnings as a [string list] before the body.
            let mut with = params.for_response();
            with.flags |= 0x08;
            let mut out = (warnings.len() as u16).to_be_bytes().to_vec();
            for w in &warnings {
                push_string(&mut out, w);
            }
            out.extend_from_slice(&body);
            ResponseFrame::new(with, ResponseOpcode::Result, out.into())
        }
        Ok(Answer::Break) => {
            // A response on a stream nobody waits for: the driver drops the connection, and
            // every request on it fails with a broken-connection error.
            let mut bogus = params.for_response();
            bogus.stream = i16::MAX;
            ResponseFrame::new(
                bogus,
                ResponseOpcode::Result,
                1i32.to_be_bytes().to_vec().into(),
            )
        }
        Ok(Answer::Later(ticket)) => deferred::marker(frame, ticket),
        Err(e) => error_frame(frame, &e),
    }
}

pub(super) enum Answer {
    /// A result body, with the warnings for the client.
    Body(Vec<u8>, Vec<String>),
    Break,
    /// The answer parked under this ticket, once the request is done (see `deferred`).
    Later(u64),
}

fn error_frame(frame: &RequestFrame, e: &DbErr) -> ResponseFrame {
    ResponseFrame::forged_error(frame.params, e.error.clone(), Some(&e.message)).unwrap_or_else(
        |_| {
            ResponseFrame::new(
                frame.params.for_response(),
                ResponseOpcode::Error,
                Vec::<u8>::new().into(),
            )
        },
    )
}

pub(super) fn lock<T>(m: &Mutex<T>) -> Result<std::sync::MutexGuard<'_, T>, DbErr> {
    m.lock().map_err(|_| DbErr {
        error: DbError::ServerError,
        message: "poisoned".into(),
    })
}

mod request;

use request::run;
