//! Encoding results: rows metadata, paging state, schema changes.

use super::exec::{Outcome, Rows};
use super::values::{CqlType, push_bytes, push_string};

pub(super) fn push_columns(out: &mut Vec<u8>, columns: &[(String, CqlType)]) {
    for (name, ty) in columns {
        push_string(out, name);
        ty.write_option(out);
    }
}

pub(super) fn write_metadata(out: &mut Vec<u8>, rows: &Rows) {
    out.extend_from_slice(&1i32.to_be_bytes()); // GLOBAL_TABLES_SPEC
    out.extend_from_slice(&(rows.columns.len() as i32).to_be_bytes());
    push_string(out, &rows.keyspace);
    push_string(out, &rows.table);
    push_columns(out, &rows.columns);
}

pub(super) fn encode(outcome: Outcome) -> Vec<u8> {
    let mut out = Vec::new();
    match outcome {
        Outcome::Void => out.extend_from_slice(&1i32.to_be_bytes()),
        Outcome::Rows(rows) => {
            out.extend_from_slice(&2i32.to_be_bytes());
            write_metadata(&mut out, &rows);
            if let Some(state) = &rows.paging_state {
                // Patch the flags: HAS_MORE_PAGES, and the state after the column count.
                out[4..8].copy_from_slice(&3i32.to_be_bytes());
                let tail = out.split_off(12);
                push_bytes(&mut out, Some(state.clone()));
                out.extend_from_slice(&tail);
            }
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
