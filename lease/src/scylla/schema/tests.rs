//! Tests of the schema options: validation, scope checks and the tablets fallback.

use scylla::errors::{DbError, ExecutionError, RequestAttemptError};

use super::create::is_unknown_tablets_option;
use super::*;

#[test]
fn only_an_unknown_tablets_option_falls_back_to_vnodes() {
    let db = |error: DbError, message: &str| {
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(error, message.into()))
    };
    assert!(is_unknown_tablets_option(&db(
        DbError::SyntaxError,
        "Unknown property 'tablets'"
    )));
    for other in [
        db(
            DbError::ConfigError,
            "Tablets are only supported with NetworkTopologyStrategy",
        ),
        db(DbError::Invalid, "tablets: bad initial count"),
        db(DbError::SyntaxError, "line 1: no viable alternative"),
    ] {
        assert!(!is_unknown_tablets_option(&other), "{other}");
    }
}

#[test]
fn the_default_scope_spans_every_data_centre() {
    let options = ScyllaOptions::default();
    assert_eq!(options.serial_consistency, SerialConsistency::Serial);
    assert_eq!(options.consistency, Consistency::Quorum);
    assert!(!options.per_datacenter_paxos);
    assert!(options.validate().is_ok());
}

#[test]
fn a_per_datacenter_scope_is_never_silent() {
    let silent = ScyllaOptions {
        serial_consistency: SerialConsistency::LocalSerial,
        ..ScyllaOptions::default()
    };
    assert!(matches!(
        silent.validate(),
        Err(InvalidArgument::Invalid {
            field: "serial_consistency",
            ..
        })
    ));
    let explicit = ScyllaOptions::default().per_datacenter();
    assert_eq!(explicit.serial_consistency, SerialConsistency::LocalSerial);
    assert_eq!(explicit.consistency, Consistency::LocalQuorum);
    assert!(explicit.validate().is_ok());
}

#[test]
fn per_datacenter_paxos_with_serial_is_refused() {
    let meaningless = ScyllaOptions {
        per_datacenter_paxos: true,
        ..ScyllaOptions::default()
    };
    assert!(matches!(
        meaningless.validate(),
        Err(InvalidArgument::Invalid {
            field: "per_datacenter_paxos",
            ..
        })
    ));
}

#[test]
fn levels_that_make_polls_stale_are_flagged() {
    let with = |consistency| ScyllaOptions {
        consistency,
        ..ScyllaOptions::default()
    };
    assert!(!ScyllaOptions::default().polls_may_lag());
    assert!(!ScyllaOptions::default().per_datacenter().polls_may_lag());
    for stale in [
        Consistency::LocalQuorum,
        Consistency::One,
        Consistency::LocalOne,
    ] {
        assert!(with(stale).polls_may_lag(), "{stale:?} with SERIAL");
        // Accepted (safety does not depend on polls), with a warning.
        assert!(with(stale).validate().is_ok());
    }
    for fine in [
        Consistency::Quorum,
        Consistency::EachQuorum,
        Consistency::All,
    ] {
        assert!(!with(fine).polls_may_lag(), "{fine:?} with SERIAL");
    }
    let local_one = ScyllaOptions {
        consistency: Consistency::LocalOne,
        ..ScyllaOptions::default().per_datacenter()
    };
    assert!(local_one.polls_may_lag());
}

/// With SERIAL, plain cells are read and written at a level that overlaps across every data
/// centre: LOCAL_QUORUM becomes QUORUM and LOCAL_ONE becomes ONE; other levels are kept.
#[test]
fn local_quorum_cells_are_read_and_written_at_quorum() {
    for (chosen, cells) in [
        (Consistency::LocalQuorum, Consistency::Quorum),
        (Consistency::LocalOne, Consistency::One),
        (Consistency::One, Consistency::One),
        (Consistency::Two, Consistency::Two),
        (Consistency::Three, Consistency::Three),
        (Consistency::Quorum, Consistency::Quorum),
        (Consistency::EachQuorum, Consistency::EachQuorum),
        (Consistency::All, Consistency::All),
        (Consistency::Any, Consistency::One),
    ] {
        let options = ScyllaOptions {
            consistency: chosen,
            ..ScyllaOptions::default()
        };
        assert_eq!(
            options.cells_in("lock_cells").consistency,
            cells,
            "{chosen:?}"
        );
        assert_eq!(options.waiting_line().consistency, cells, "{chosen:?}");
    }
}

/// With per-data-centre Paxos every guarantee is scoped to one data centre, so the cells keep
/// the local level rather than paying a cross-DC round trip.
#[test]
fn per_datacenter_cells_stay_local() {
    let options = ScyllaOptions::default().per_datacenter();
    assert_eq!(
        options.cells_in("lock_cells").consistency,
        Consistency::LocalQuorum
    );
}

/// ANY is refused for `consistency`, naming the field: it cannot read, and every primitive
/// reads (a lease's first look, followers' polls).
#[test]
fn consistency_any_is_refused() {
    let options = ScyllaOptions {
        consistency: Consistency::Any,
        ..ScyllaOptions::default()
    };
    assert!(matches!(
        options.validate(),
        Err(InvalidArgument::Invalid {
            field: "consistency",
            ..
        })
    ));
}

/// The lease helper lists the lease table and its waiting line, each named as its template
/// renders it.
#[test]
fn the_schema_lists_the_tables_it_creates_by_name() {
    let options = ScyllaOptions {
        keyspace: "ops".into(),
        table: "held".into(),
        ..ScyllaOptions::default()
    };
    let tables = options.tables();
    let names: Vec<String> = tables.iter().map(TableSchema::name).collect();
    assert_eq!(names, ["held", "held_waiting"]);
    for table in &tables {
        let statement = table.statement();
        assert!(
            statement.starts_with(&format!(
                "CREATE TABLE IF NOT EXISTS ops.{} (",
                table.name()
            )),
            "{statement}"
        );
    }
    let suffixed = TableSchema {
        location: options,
        template: "CREATE TABLE IF NOT EXISTS {keyspace}.{table}_index (k text PRIMARY KEY)",
    };
    assert_eq!(suffixed.name(), "held_index");
}
