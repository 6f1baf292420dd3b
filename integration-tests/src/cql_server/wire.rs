//! Requests in, responses out: the handler every proxy rule calls.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use scylla_cql::frame::protocol_features::ProtocolFeatures;
use scylla_cql::frame::request::RequestV2;
use scylla_cql::frame::response::error::DbError;
use scylla_cql::frame::types::RawValue;
use scylla_proxy::{RequestFrame, RequestOpcode, ResponseFrame, ResponseOpcode};

use super::engine::{DbErr, Engine};
use super::exec::{Outcome, Rows};
use super::parser::{Statement, parse};
use super::values::{CqlType, push_bytes, push_string};
use cql_lease::memory::Op;

/// The id the server gives a prepared statement: a hash of its text, so faults can be aimed
/// at a statement before it is prepared.
pub fn statement_id(text: &str) -> Vec<u8> {
    let mut id = Vec::with_capacity(16);
    for salt in [0x5eed_u64, 0xfee1] {
        let mut h = DefaultHasher::new();
        salt.hash(&mut h);
        text.hash(&mut h);
        id.extend_from_slice(&h.finish().to_be_bytes());
    }
    id
}

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

/// State shared by every rule of one server.
#[derive(Debug)]
pub struct Shared {
    /// The data.
    pub engine: Mutex<Engine>,
    prepared: Mutex<HashMap<Vec<u8>, (String, Statement)>>,
    /// Texts (or, ending in `*`, prefixes) the server accepts; `None` accepts any.
    allowlist: Option<Vec<String>>,
    /// Which lease operation each known statement id is.
    ops: HashMap<Vec<u8>, Op>,
    counts: [AtomicU64; 4],
    /// Statements refused as unknown, for diagnostics.
    pub refused: Mutex<Vec<String>>,
    /// Texts of the statements executed so far.
    pub executed: Mutex<std::collections::BTreeSet<String>>,
}

impl Shared {
    /// State over `engine`.
    pub fn new(engine: Engine, allowlist: Option<Vec<String>>, ops: HashMap<Vec<u8>, Op>) -> Self {
        Shared {
            engine: Mutex::new(engine),
            prepared: Mutex::default(),
            allowlist,
            ops,
            counts: Default::default(),
            refused: Mutex::default(),
            executed: Mutex::default(),
        }
    }

    /// Lease operations executed (or failed by a fault) so far.
    pub fn counts(&self) -> cql_lease::CallCounts {
        let get = |op: Op| self.counts[op as usize].load(Ordering::SeqCst);
        cql_lease::CallCounts {
            try_acquire: get(Op::TryAcquire),
            renew: get(Op::Renew),
            release: get(Op::Release),
            read: get(Op::Read),
        }
    }

    fn parse_known(&self, text: &str) -> Result<Statement, DbErr> {
        if let Some(allow) = &self.allowlist {
            let known = allow.iter().any(|a| match a.strip_suffix('*') {
                Some(prefix) => text.starts_with(prefix),
                None => a == text,
            });
            if !known {
                if let Ok(mut refused) = self.refused.lock() {
                    refused.push(text.to_owned());
                }
                return Err(DbErr::invalid(format!(
                    "the CQL test server does not know this statement: {text}"
                )));
            }
        }
        parse(text).map_err(|e| DbErr::syntax(format!("line 1: {e} (in: {text})")))
    }
}

/// Answers one request frame.
pub fn handle(shared: &Shared, frame: RequestFrame, reaction: &Reaction) -> ResponseFrame {
    let params = frame.params;
    let respond =
        |opcode, body: Vec<u8>| ResponseFrame::new(params.for_response(), opcode, body.into());
    let result = match frame.opcode {
        RequestOpcode::Options => {
            let options = HashMap::from([
                ("CQL_VERSION".to_owned(), vec!["3.4.5".to_owned()]),
                ("COMPRESSION".to_owned(), Vec::new()),
            ]);
            return ResponseFrame::forged_supported(params, &options)
                .unwrap_or_else(|_| error_frame(&frame, &DbErr::invalid("options")));
        }
        RequestOpcode::Startup | RequestOpcode::Register => {
            return ResponseFrame::forged_ready(params);
        }
        RequestOpcode::Prepare => prepare(shared, &frame),
        RequestOpcode::Query | RequestOpcode::Execute | RequestOpcode::Batch => {
            run(shared, &frame, reaction)
        }
        other => Err(DbErr {
            error: DbError::ProtocolError,
            message: format!("unsupported opcode {other:?}"),
        }),
    };
    match result {
        Ok(Answer::Body(body)) => respond(ResponseOpcode::Result, body),
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
        Err(e) => error_frame(&frame, &e),
    }
}

/// A statement of a request: its id, text, parsed form and bound values.
type Resolved = (Vec<u8>, String, Statement, Vec<Option<Vec<u8>>>);

enum Answer {
    Body(Vec<u8>),
    Break,
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

fn prepare(shared: &Shared, frame: &RequestFrame) -> Result<Answer, DbErr> {
    let mut body = &frame.body[..];
    let text = scylla_cql::frame::types::read_long_string(&mut body)
        .map_err(|e| DbErr {
            error: DbError::ProtocolError,
            message: e.to_string(),
        })?
        .to_owned();
    let statement = shared.parse_known(&text)?;
    let super::query::BindSpecs {
        markers: specs,
        pk_indexes,
        result,
    } = lock(&shared.engine)?.bind_specs(&statement)?;
    let id = statement_id(&text);
    lock(&shared.prepared)?.insert(id.clone(), (text, statement.clone()));
    let mut out = 4i32.to_be_bytes().to_vec();
    out.extend_from_slice(&(id.len() as u16).to_be_bytes());
    out.extend_from_slice(&id);
    let (ks, table) = table_of(&statement);
    out.extend_from_slice(&(if specs.is_empty() { 0i32 } else { 1 }).to_be_bytes());
    out.extend_from_slice(&(specs.len() as i32).to_be_bytes());
    out.extend_from_slice(&(pk_indexes.len() as i32).to_be_bytes());
    for i in &pk_indexes {
        out.extend_from_slice(&i.to_be_bytes());
    }
    if !specs.is_empty() {
        push_string(&mut out, &ks);
        push_string(&mut out, &table);
        push_columns(&mut out, &specs);
    }
    match result {
        Some(rows) => write_metadata(&mut out, &rows),
        None => {
            out.extend_from_slice(&4i32.to_be_bytes()); // NO_METADATA
            out.extend_from_slice(&0i32.to_be_bytes());
        }
    }
    Ok(Answer::Body(out))
}

fn table_of(statement: &Statement) -> (String, String) {
    let t = match statement {
        Statement::Select { table, .. }
        | Statement::Update { table, .. }
        | Statement::Insert { table, .. }
        | Statement::Delete { table, .. }
        | Statement::CreateTable { table, .. } => table,
        _ => return (String::new(), String::new()),
    };
    (t.keyspace.clone().unwrap_or_default(), t.table.clone())
}

fn bound(values: &scylla_cql::serialize::row::SerializedValues) -> Vec<Option<Vec<u8>>> {
    values
        .iter()
        .map(|v| match v {
            RawValue::Value(b) => Some(b.to_vec()),
            RawValue::Null | RawValue::Unset => None,
        })
        .collect()
}

fn run(shared: &Shared, frame: &RequestFrame, reaction: &Reaction) -> Result<Answer, DbErr> {
    let request = frame
        .deserialize(&ProtocolFeatures::default())
        .map_err(|e| DbErr {
            error: DbError::ProtocolError,
            message: e.to_string(),
        })?;
    let lookup = |id: &[u8]| -> Result<(Vec<u8>, String, Statement), DbErr> {
        let prepared = lock(&shared.prepared)?;
        let (text, statement) = prepared.get(id).ok_or_else(|| DbErr {
            error: DbError::Unprepared {
                statement_id: bytes::Bytes::copy_from_slice(id),
            },
            message: "unknown prepared statement".into(),
        })?;
        Ok((id.to_vec(), text.clone(), statement.clone()))
    };
    let mut statements: Vec<Resolved> = Vec::new();
    let is_batch = matches!(request, RequestV2::Batch(_));
    match &request {
        RequestV2::Query(q) => {
            let statement = shared.parse_known(&q.contents)?;
            statements.push((
                statement_id(&q.contents),
                q.contents.to_string(),
                statement,
                bound(&q.parameters.values),
            ));
        }
        RequestV2::Execute(e) => {
            let (id, text, statement) = lookup(e.id.as_ref())?;
            statements.push((id, text, statement, bound(&e.parameters.values)));
        }
        RequestV2::Batch(b) => {
            for (s, values) in b.statements.iter().zip(b.values.iter()) {
                let (id, text, statement) = match s {
                    scylla_cql::frame::request::batch::BatchStatement::Query { text } => (
                        statement_id(text),
                        text.to_string(),
                        shared.parse_known(text)?,
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
    if let Some(op) = statements.first().and_then(|(id, ..)| shared.ops.get(id)) {
        shared.counts[*op as usize].fetch_add(1, Ordering::SeqCst);
    }
    let execute = || -> Result<Outcome, DbErr> {
        let mut engine = lock(&shared.engine)?;
        lock(&shared.executed)?.extend(statements.iter().map(|(_, text, ..)| text.clone()));
        if is_batch {
            let refs: Vec<(&Statement, &[Option<Vec<u8>>])> = statements
                .iter()
                .map(|(_, _, s, b)| (s, b.as_slice()))
                .collect();
            engine.batch(&refs, true)
        } else {
            let (_, _, s, b) = &statements[0];
            engine.execute(s, b)
        }
    };
    match reaction {
        Reaction::Normal => Ok(Answer::Body(encode(execute()?))),
        Reaction::Fail(error) => Err(DbErr {
            error: error.clone(),
            message: "injected by the CQL test server".into(),
        }),
        Reaction::ApplyThenFail(error) => {
            execute()?;
            Err(DbErr {
                error: error.clone(),
                message: "injected by the CQL test server after applying".into(),
            })
        }
        Reaction::Break => Ok(Answer::Break),
        Reaction::ApplyThenBreak => {
            execute()?;
            Ok(Answer::Break)
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> Result<std::sync::MutexGuard<'_, T>, DbErr> {
    m.lock().map_err(|_| DbErr {
        error: DbError::ServerError,
        message: "poisoned".into(),
    })
}

fn push_columns(out: &mut Vec<u8>, columns: &[(String, CqlType)]) {
    for (name, ty) in columns {
        push_string(out, name);
        ty.write_option(out);
    }
}

fn write_metadata(out: &mut Vec<u8>, rows: &Rows) {
    out.extend_from_slice(&1i32.to_be_bytes()); // GLOBAL_TABLES_SPEC
    out.extend_from_slice(&(rows.columns.len() as i32).to_be_bytes());
    push_string(out, &rows.keyspace);
    push_string(out, &rows.table);
    push_columns(out, &rows.columns);
}

fn encode(outcome: Outcome) -> Vec<u8> {
    let mut out = Vec::new();
    match outcome {
        Outcome::Void => out.extend_from_slice(&1i32.to_be_bytes()),
        Outcome::Rows(rows) => {
            out.extend_from_slice(&2i32.to_be_bytes());
            write_metadata(&mut out, &rows);
            out.extend_from_slice(&(rows.rows.len() as i32).to_be_bytes());
            for row in &rows.rows {
                for value in row {
                    push_bytes(&mut out, value.encode());
                }
            }
        }
        Outcome::SetKeyspace(ks) => {
            out.extend_from_slice(&3i32.to_be_bytes());
            push_string(&mut out, &ks);
        }
        Outcome::SchemaChange {
            target,
            keyspace,
            name,
        } => {
            out.extend_from_slice(&5i32.to_be_bytes());
            push_string(&mut out, "CREATED");
            push_string(&mut out, target);
            push_string(&mut out, &keyspace);
            if let Some(name) = name {
                push_string(&mut out, &name);
            }
        }
    }
    out
}
