//! The consistency checks a Cassandra coordinator applies per kind of statement, before
//! running it (a single node would otherwise accept every level).

use scylla_cql::Consistency;

use super::engine::DbErr;
use super::parser::{Conditions, Statement};

/// Refuses a level the statement kind cannot use: `ANY` for reads, a serial level for plain
/// writes and for the commit phase of conditional ones.
pub fn check_consistency(statements: &[&Statement], consistency: Consistency) -> Result<(), DbErr> {
    let serial = matches!(consistency, Consistency::Serial | Consistency::LocalSerial);
    let conditional = |s: &Statement| match s {
        Statement::Update { conditions, .. }
        | Statement::Insert { conditions, .. }
        | Statement::Delete { conditions, .. } => !matches!(conditions, Conditions::None),
        _ => false,
    };
    let is_write = |s: &Statement| {
        matches!(
            s,
            Statement::Update { .. } | Statement::Insert { .. } | Statement::Delete { .. }
        )
    };
    if statements
        .iter()
        .any(|s| matches!(s, Statement::Select { .. }))
        && consistency == Consistency::Any
    {
        return Err(DbErr::invalid(
            "ANY ConsistencyLevel is only supported for writes",
        ));
    }
    if serial && statements.iter().any(|s| conditional(s)) {
        return Err(DbErr::invalid(format!(
            "{} is not supported as conditional update commit consistency. Use ANY if you mean \"make sure it is accepted but I don't care how many replicas commit it for non-SERIAL reads\"",
            name(consistency)
        )));
    }
    if serial && statements.iter().any(|s| is_write(s)) {
        return Err(DbErr::invalid(
            "You must use conditional updates for serializable writes",
        ));
    }
    Ok(())
}

fn name(c: Consistency) -> &'static str {
    match c {
        Consistency::LocalSerial => "LOCAL_SERIAL",
        _ => "SERIAL",
    }
}
