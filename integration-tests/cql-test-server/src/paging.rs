//! The paging state: where the next page of a read starts (after the last row returned, with
//! what is left of the `LIMIT`), in the server's own encoding.

use scylla_cql::frame::response::error::DbError;

use super::engine::{Clustering, Component, DbErr, Table};
use super::values::Value;

/// Where a page ends: the partition and the last clustering key returned.
pub(super) struct Position {
    pub remaining: Option<i32>,
    pub partition: Vec<u8>,
    pub after: Option<Vec<Option<Vec<u8>>>>,
}

pub(super) fn encode_position(
    remaining: Option<i32>,
    pk: &[u8],
    ck: Option<&Clustering>,
) -> Vec<u8> {
    let mut out = remaining.unwrap_or(-1).to_be_bytes().to_vec();
    out.extend_from_slice(&(pk.len() as u32).to_be_bytes());
    out.extend_from_slice(pk);
    match ck {
        None => out.push(0),
        Some(ck) => {
            out.push(1);
            for c in &ck.0 {
                let bytes = c.value.encode().unwrap_or_default();
                out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
                out.extend_from_slice(&bytes);
            }
        }
    }
    out
}

pub(super) fn decode_position(bytes: &[u8]) -> Result<Position, DbErr> {
    let bad = || DbErr {
        error: DbError::ProtocolError,
        message: "invalid paging state".into(),
    };
    let int = |b: &[u8], at: usize| -> Result<u32, DbErr> {
        b.get(at..at + 4)
            .and_then(|s| s.try_into().ok())
            .map(u32::from_be_bytes)
            .ok_or_else(bad)
    };
    let remaining = int(bytes, 0)? as i32;
    let pk_len = int(bytes, 4)? as usize;
    let partition = bytes.get(8..8 + pk_len).ok_or_else(bad)?.to_vec();
    let mut at = 8 + pk_len;
    let after = match bytes.get(at).ok_or_else(bad)? {
        0 => None,
        _ => {
            at += 1;
            let mut parts = Vec::new();
            while at < bytes.len() {
                let len = int(bytes, at)? as usize;
                parts.push(Some(
                    bytes.get(at + 4..at + 4 + len).ok_or_else(bad)?.to_vec(),
                ));
                at += 4 + len;
            }
            Some(parts)
        }
    };
    Ok(Position {
        remaining: (remaining >= 0).then_some(remaining),
        partition,
        after,
    })
}

pub(super) fn decode_clustering(
    table: &Table,
    parts: &[Option<Vec<u8>>],
) -> Result<Clustering, DbErr> {
    let mut out = Vec::new();
    for ((col, desc), bytes) in table.clustering.iter().zip(parts) {
        let ty = table.column_type(col)?;
        let value =
            Value::decode(ty, bytes.as_deref().unwrap_or_default()).map_err(DbErr::invalid)?;
        out.push(Component { value, desc: *desc });
    }
    Ok(Clustering(out))
}
