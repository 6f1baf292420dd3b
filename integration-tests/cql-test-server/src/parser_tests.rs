//! Parser unit tests.
use super::*;

#[test]
fn reserved_keywords_need_quotes() {
    assert!(parse("CREATE TABLE ks.t (k text PRIMARY KEY, token bigint)").is_err());
    assert!(parse("CREATE TABLE ks.t (k text PRIMARY KEY, \"token\" bigint)").is_ok());
    assert!(parse("SELECT order FROM ks.t").is_err());
    assert!(parse("SELECT key, ttl(v), writetime(v) FROM ks.t WHERE key = ?").is_ok());
}

#[test]
fn markers_are_numbered_in_order() {
    let s = parse("UPDATE ks.t USING TTL ? SET a = ?, b = 'x' WHERE k = ? IF a = null AND b < ?")
        .unwrap();
    let Statement::Update {
        using,
        conditions: Conditions::Columns(c),
        ..
    } = s
    else {
        panic!()
    };
    assert_eq!(using.ttl, Some(Term::Marker(0)));
    assert_eq!(
        c[1],
        Condition::Compare("b".into(), Op::Lt, Term::Marker(3))
    );
}
