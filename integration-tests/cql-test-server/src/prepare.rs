//! `PREPARE`: the statement's id, bind markers and result metadata.

use scylla_cql::frame::response::error::DbError;
use scylla_proxy::RequestFrame;

use super::engine::DbErr;
use super::frames::{push_columns, write_metadata};
use super::parser::Statement;
use super::registry::statement_id;
use super::values::push_string;
use super::wire::{Answer, Shared, lock};

pub(super) fn prepare(shared: &Shared, frame: &RequestFrame) -> Result<Answer, DbErr> {
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
    let shared_form = (
        std::sync::Arc::from(text.as_str()),
        std::sync::Arc::new(statement.clone()),
    );
    lock(&shared.prepared)?.insert(id.clone(), shared_form);
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
    Ok(Answer::Body(out, Vec::new()))
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
