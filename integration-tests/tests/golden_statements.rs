//! The backends' statements equal the golden list the CQL test server is taught from: a
//! statement changed in a backend without updating the list fails here (and on the strict
//! server, which would refuse it).

use cql_lease::scylla::cql as lease;
use cql_workqueue::scylla::cql as queue;
use integration_tests::golden;

fn check(backend: &str, all: &[&str], golden: &[(&str, &str)]) {
    let expected: Vec<&str> = golden.iter().map(|(_, text)| *text).collect();
    let changed: Vec<&&str> = all.iter().filter(|t| !expected.contains(t)).collect();
    let dropped: Vec<&&str> = expected.iter().filter(|t| !all.contains(t)).collect();
    assert!(
        changed.is_empty() && dropped.is_empty() && all.len() == expected.len(),
        "{backend}: cql::ALL differs from integration_tests::golden (update both the golden list and what the server is taught)\nnot in the golden list: {changed:#?}\nno longer sent: {dropped:#?}"
    );
}

#[test]
fn lease_statements_equal_the_golden_list() {
    check("lease", lease::ALL, golden::LEASE);
}

#[test]
fn queue_statements_equal_the_golden_list() {
    check("work queue", queue::ALL, golden::QUEUE);
}
