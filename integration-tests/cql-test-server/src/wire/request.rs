//! One request frame run: decoded into its statements (a query, an execution of a prepared
//! one, or a batch) and their parameters, checked, counted, and executed on the engine as
//! the rule's reaction says.

use std::sync::Arc;

use scylla_cql::frame::protocol_features::ProtocolFeatures;
use scylla_cql::frame::request::RequestV2;
use scylla_cql::frame::response::error::DbError;
use scylla_cql::frame::types::RawValue;
use scylla_proxy::RequestFrame;

use super::{Answer, Prepared, Reaction, Shared, answer_frame, lock};
use crate::consistency::check_consistency;
use crate::deferred;
use crate::engine::{DbErr, Engine};
use crate::exec::{Outcome, Request, contention_timeout};
use crate::frames::encode;
use crate::parser::Statement;
use crate::paxos::{Model, TimedOut};
use crate::registry::statement_id;
use crate::stats::{ConsistencyUse, PartitionId};

/// A statement of a request: its id, text, parsed form and bound values.
type Resolved = (Vec<u8>, Arc<str>, Arc<Statement>, Vec<Option<Vec<u8>>>);

fn bound(values: &scylla_cql::serialize::row::SerializedValues) -> Vec<Option<Vec<u8>>> {
    values
        .iter()
        .map(|v| match v {
            RawValue::Value(b) => Some(b.to_vec()),
            RawValue::Null | RawValue::Unset => None,
        })
        .collect()
}

pub(super) fn run(
    shared: &Arc<Shared>,
    node: usize,
    frame: &RequestFrame,
    reaction: &Reaction,
) -> Result<Answer, DbErr> {
    let request = frame
        .deserialize(&ProtocolFeatures::default())
        .map_err(|e| DbErr {
            error: DbError::ProtocolError,
            message: e.to_string(),
        })?;
    let lookup = |id: &[u8]| -> Result<(Vec<u8>, Prepared), DbErr> {
        let prepared = lock(&shared.prepared)?;
        let (text, statement) = prepared.get(id).ok_or_else(|| DbErr {
            error: DbError::Unprepared {
                statement_id: bytes::Bytes::copy_from_slice(id),
            },
            message: "unknown prepared statement".into(),
        })?;
        Ok((id.to_vec(), (Arc::clone(text), Arc::clone(statement))))
    };
    *lock(&shared.per_node)?.entry(node).or_default() += 1;
    let is_batch = matches!(request, RequestV2::Batch(_));
    let mut statements: Vec<Resolved> = match &request {
        RequestV2::Batch(b) => Vec::with_capacity(b.statements.len()),
        _ => Vec::with_capacity(1),
    };
    match &request {
        RequestV2::Query(q) => {
            let statement = shared.parse_known(&q.contents)?;
            statements.push((
                statement_id(&q.contents),
                Arc::from(q.contents.as_ref()),
                Arc::new(statement),
                bound(&q.parameters.values),
            ));
        }
        RequestV2::Execute(e) => {
            let (id, (text, statement)) = lookup(e.id.as_ref())?;
            statements.push((id, text, statement, bound(&e.parameters.values)));
        }
        RequestV2::Batch(b) => {
            for (s, values) in b.statements.iter().zip(b.values.iter()) {
                let (id, (text, statement)) = match s {
                    scylla_cql::frame::request::batch::BatchStatement::Query { text } => (
                        statement_id(text),
                        (
                            Arc::from(text.as_ref()),
                            Arc::new(shared.parse_known(text)?),
                        ),
                    ),
                    scylla_cql::frame::request::batch::BatchStatement::Prepared { id } => {
                        lookup(id)?
                    }
                };
                statements.push((id, text, statement, bound(values)));
            }
        }
        _ => {
            return Err(DbErr {
                error: DbError::ProtocolError,
                message: "unsupported request".into(),
            });
        }
    }
    let (consistency, serial, timestamp, page_size, paging_state) = match &request {
        RequestV2::Query(q) => params_of(&q.parameters),
        RequestV2::Execute(e) => params_of(&e.parameters),
        RequestV2::Batch(b) => (b.consistency, b.serial_consistency, b.timestamp, None, None),
        _ => (scylla_cql::Consistency::One, None, None, None, None),
    };
    let context = Request {
        text: Arc::from(""),
        serial_read: matches!(
            consistency,
            scylla_cql::Consistency::Serial | scylla_cql::Consistency::LocalSerial
        ),
        page_size,
        paging_state,
        timestamp,
        consistency,
        serial,
        paxos_settled: false,
    };
    let mut job = Job {
        node,
        is_batch,
        statements,
        context,
    };
    if let Some((id, text, ..)) = job.statements.first() {
        shared.count(id, text);
        job.context.text = Arc::clone(text);
        lock(&shared.consistencies)?.push(ConsistencyUse {
            statement: Arc::clone(text),
            consistency,
            serial,
        });
    }
    let parsed: Vec<&Statement> = job
        .statements
        .iter()
        .map(|(_, _, s, _)| s.as_ref())
        .collect();
    check_consistency(&parsed, consistency)?;
    // An injected CAS timeout carries the level of the request's Paxos phase.
    let injected = |error: &DbError| match error {
        DbError::WriteTimeout {
            received,
            required,
            write_type,
            ..
        } => DbError::WriteTimeout {
            consistency: job.context.paxos_consistency(),
            received: *received,
            required: *required,
            write_type: write_type.clone(),
        },
        other => other.clone(),
    };
    match reaction {
        Reaction::Normal => {
            job.mark_executed(shared)?;
            let mut engine = lock(&shared.engine)?;
            if let Some(model) = &shared.model
                && let Ok(runtime) = tokio::runtime::Handle::try_current()
                && let Some(partition) = job.paxos_target(&engine)?
            {
                drop(engine);
                return Ok(defer(shared, model, &runtime, frame, job, partition));
            }
            answer(job.execute_on(&mut engine))
        }
        Reaction::Fail(error) => Err(DbErr {
            error: injected(error),
            message: "injected by the CQL test server".into(),
        }),
        Reaction::ApplyThenFail(error) => {
            let error = injected(error);
            job.execute(shared)?;
            Err(DbErr {
                error,
                message: "injected by the CQL test server after applying".into(),
            })
        }
        Reaction::Break => Ok(Answer::Break),
        Reaction::ApplyThenBreak => {
            job.execute(shared)?;
            Ok(Answer::Break)
        }
    }
}

/// A request decoded: its statements and how it asks for them to run.
struct Job {
    node: usize,
    is_batch: bool,
    statements: Vec<Resolved>,
    context: Request,
}

impl Job {
    fn refs(&self) -> Vec<(&Statement, &[Option<Vec<u8>>])> {
        self.statements
            .iter()
            .map(|(_, _, s, b)| (s.as_ref(), b.as_slice()))
            .collect()
    }

    /// Records the statements' texts as executed (each once; cloned only the first time).
    fn mark_executed(&self, shared: &Shared) -> Result<(), DbErr> {
        let mut executed = lock(&shared.executed)?;
        for (_, text, ..) in &self.statements {
            if !executed.contains(text.as_ref()) {
                executed.insert(text.to_string());
            }
        }
        Ok(())
    }

    /// The partition of the request's Paxos rounds, if it runs any.
    fn paxos_target(&self, engine: &Engine) -> Result<Option<PartitionId>, DbErr> {
        engine.paxos_target(&self.refs(), self.is_batch, &self.context)
    }

    fn execute(&self, shared: &Shared) -> Result<Outcome, DbErr> {
        self.mark_executed(shared)?;
        let mut engine = lock(&shared.engine)?;
        self.execute_on(&mut engine)
    }

    fn execute_on(&self, engine: &mut Engine) -> Result<Outcome, DbErr> {
        engine.node = self.node;
        if self.is_batch {
            engine.batch(&self.refs(), true, &self.context)
        } else {
            let (_, _, s, b) = &self.statements[0];
            engine.execute(s, b, &self.context)
        }
    }
}

fn answer(outcome: Result<Outcome, DbErr>) -> Result<Answer, DbErr> {
    let outcome = outcome?;
    let warnings = match &outcome {
        Outcome::Rows(rows) => rows.warnings.clone(),
        _ => Vec::new(),
    };
    Ok(Answer::Body(encode(outcome), warnings))
}

/// Runs the Paxos rounds of `job` on `partition` in a task of their own and answers `frame`
/// with a marker for the answer to come: a request backing off holds neither the engine nor
/// its connection, whose other requests are answered meanwhile.
fn defer(
    shared: &Arc<Shared>,
    model: &Model,
    runtime: &tokio::runtime::Handle,
    frame: &RequestFrame,
    mut job: Job,
    partition: PartitionId,
) -> Answer {
    let arrived = tokio::time::Instant::now();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let ticket = shared.parked.park(rx);
    // The answer needs the request's header only.
    let head = RequestFrame::new(frame.params, frame.opcode, bytes::Bytes::new());
    let (shared, model) = (Arc::clone(shared), model.clone());
    job.context.paxos_settled = true;
    runtime.spawn(async move {
        let won = model
            .contend(&partition, arrived, |ballot| {
                let mut engine = match lock(&shared.engine) {
                    Ok(engine) => engine,
                    Err(e) => return Some(Err(e)),
                };
                // Proposed and applied under the engine's lock: nothing runs in between.
                ballot.propose().then(|| job.execute_on(&mut engine))
            })
            .await;
        let result = match won {
            Ok(outcome) => answer(outcome),
            Err(TimedOut { contentions }) => {
                if model.timeout_applies
                    && !job.context.serial_read
                    && let Ok(mut engine) = lock(&shared.engine)
                {
                    // The outcome of a timed-out round is unknown: here it applied.
                    let _ = job.execute_on(&mut engine);
                }
                Err(contention_timeout(&job.context, contentions))
            }
        };
        let _ = tx.send(deferred::to_bytes(&answer_frame(&head, result)));
    });
    Answer::Later(ticket)
}

type Params = (
    scylla_cql::Consistency,
    Option<scylla_cql::frame::types::SerialConsistency>,
    Option<i64>,
    Option<i32>,
    Option<Vec<u8>>,
);

fn params_of(p: &scylla_cql::frame::request::query::QueryParameters<'_>) -> Params {
    (
        p.consistency,
        p.serial_consistency,
        p.timestamp,
        p.page_size,
        p.paging_state.as_bytes_slice().map(|b| b.to_vec()),
    )
}
