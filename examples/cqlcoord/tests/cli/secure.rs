//! Credentials and TLS against a CQL test server that requires them: password login from
//! the flags and from the environment, TLS verified with the given CA, mutual TLS with a
//! client certificate. Each refusal is one line and a non-zero exit.

use std::path::Path;
use std::process::Output;

use cql_test_server::{Flavor, ServerOptions, TestCa, TlsOptions};

use crate::common::{run, run_env, scratch, server_with, text};

const LOGIN: [&str; 4] = ["--user", "ops", "--password", "s3cret"];

/// A refusal: exit 1 (a connection failure), one `cqlcoord:` line naming the hosts.
fn refused(out: &Output, what: &str) -> String {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{what}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{what}: not one line: {stderr}");
    assert!(
        stderr.starts_with("cqlcoord: connecting to "),
        "{what}: {stderr}"
    );
    assert!(
        !stderr.trim_end().contains("  "),
        "{what}: folded: {stderr}"
    );
    assert!(out.stdout.is_empty(), "{what}");
    eprintln!("{what}: {stderr}");
    stderr
}

fn succeeded(out: &Output, what: &str) -> String {
    assert_eq!(out.status.code(), Some(0), "{what}: {}", text(&out.stderr));
    text(&out.stdout)
}

fn write(dir: &Path, name: &str, pem: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, pem).expect("write a PEM file");
    path.to_str().expect("utf-8 path").to_owned()
}

fn with<'a>(flags: &[&'a str], command: &[&'a str]) -> Vec<&'a str> {
    let mut args = flags.to_vec();
    args.extend(command);
    args
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_login_works_from_flags_and_from_the_environment() {
    let options = ServerOptions::strict(Flavor::Cassandra).with_password_auth("ops", "s3cret");
    // `schema create` logs in with the flags.
    let (_server, hosts) = server_with(options, "simple:1", &LOGIN).await;
    let acquire = [
        "lease", "acquire", "report", "--owner", "ops", "--ttl", "30s",
    ];
    succeeded(&run(&hosts, &with(&LOGIN, &acquire), None).await, "flags");
    let env = [("CQLCOORD_USER", "ops"), ("CQLCOORD_PASSWORD", "s3cret")];
    let get = ["--request-timeout", "2s", "lease", "get", "report"];
    let shown = succeeded(&run_env(&hosts, &get, &env, None).await, "environment");
    assert!(shown.contains("held by owner=ops"), "{shown}");

    let wrong = [("CQLCOORD_USER", "ops"), ("CQLCOORD_PASSWORD", "guess")];
    let stderr = refused(&run_env(&hosts, &get, &wrong, None).await, "wrong password");
    assert!(stderr.contains("password"), "names the cause: {stderr}");
    let stranger = ["--user", "eve", "--password", "s3cret"];
    refused(
        &run(&hosts, &with(&stranger, &get), None).await,
        "wrong user",
    );
    let stderr = refused(&run(&hosts, &get, None).await, "no credentials");
    assert!(stderr.contains("Authentication is required"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_works_with_the_servers_ca_and_fails_with_another() {
    let dir = scratch("tls");
    let ca = TestCa::new("cqlcoord test CA").expect("CA");
    let other = TestCa::new("some other CA").expect("CA");
    let ca_pem = write(&dir, "ca.pem", &ca.cert_pem());
    let other_pem = write(&dir, "other.pem", &other.cert_pem());
    let options = ServerOptions::strict(Flavor::Cassandra).with_tls(TlsOptions::new(ca));
    let tls = ["--tls-ca", ca_pem.as_str()];
    let (_server, hosts) = server_with(options, "simple:1", &tls).await;
    let acquire = [
        "lease", "acquire", "report", "--owner", "ops", "--ttl", "30s",
    ];
    succeeded(&run(&hosts, &with(&tls, &acquire), None).await, "TLS");
    let get = ["--request-timeout", "2s", "lease", "get", "report"];
    let env = [("CQLCOORD_TLS_CA", ca_pem.as_str())];
    let shown = succeeded(&run_env(&hosts, &get, &env, None).await, "TLS from env");
    assert!(shown.contains("held by owner=ops"), "{shown}");

    let wrong = ["--tls-ca", other_pem.as_str()];
    let stderr = refused(&run(&hosts, &with(&wrong, &get), None).await, "another CA");
    assert!(stderr.contains("certificate"), "names the cause: {stderr}");
    refused(&run(&hosts, &get, None).await, "no TLS");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_accepts_a_client_certificate_and_refuses_none_or_a_foreign_one() {
    let dir = scratch("mtls");
    let ca = TestCa::new("cqlcoord test CA").expect("CA");
    let other = TestCa::new("some other CA").expect("CA");
    let ca_pem = write(&dir, "ca.pem", &ca.cert_pem());
    let (cert, key) = ca.issue_client("ops").expect("client certificate");
    let cert = write(&dir, "client.pem", &cert);
    let key = write(&dir, "client.key", &key);
    let (foreign_cert, foreign_key) = other.issue_client("ops").expect("client certificate");
    let foreign_cert = write(&dir, "foreign.pem", &foreign_cert);
    let foreign_key = write(&dir, "foreign.key", &foreign_key);
    let options = ServerOptions::strict(Flavor::Cassandra)
        .with_tls(TlsOptions::new(ca).with_client_auth())
        // Both at once: TLS first, then the password login.
        .with_password_auth("ops", "s3cret");
    let mut mutual = vec!["--tls-ca", &ca_pem, "--tls-cert", &cert, "--tls-key", &key];
    mutual.extend(LOGIN);
    let (_server, hosts) = server_with(options, "simple:1", &mutual).await;
    let acquire = [
        "lease", "acquire", "report", "--owner", "ops", "--ttl", "30s",
    ];
    succeeded(
        &run(&hosts, &with(&mutual, &acquire), None).await,
        "mutual TLS",
    );

    let get = ["--request-timeout", "2s", "lease", "get", "report"];
    let mut no_cert = vec!["--tls-ca", ca_pem.as_str()];
    no_cert.extend(LOGIN);
    refused(
        &run(&hosts, &with(&no_cert, &get), None).await,
        "no client cert",
    );
    let mut foreign = vec![
        "--tls-ca",
        &ca_pem,
        "--tls-cert",
        &foreign_cert,
        "--tls-key",
        &foreign_key,
    ];
    foreign.extend(LOGIN);
    refused(
        &run(&hosts, &with(&foreign, &get), None).await,
        "foreign client cert",
    );
}
