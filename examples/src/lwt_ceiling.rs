//! A node's ceilings, measured beside a benchmark: tasks looping `UPDATE ... IF` on
//! partitions of their own (no contention), counting the rounds that applied; or plain
//! `UPDATE`s of one partition (as the queue's index writes land on one bucket's partition).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use scylla::client::session_builder::SessionBuilder;
use scylla::value::Row;

/// Plain writes a second that `tasks` tasks complete on the node at `addr` over `seconds`,
/// all into one partition of `keyspace.plain_ceiling` (created if missing), with client
/// timestamps, like the queue's index writes into one bucket.
///
/// # Errors
///
/// When the node cannot be reached, or a statement fails.
pub async fn measure_plain(
    addr: &str,
    keyspace: &str,
    tasks: usize,
    seconds: u64,
) -> Result<f64, Box<dyn std::error::Error>> {
    let session = Arc::new(SessionBuilder::new().known_node(addr).build().await?);
    let table = format!("{keyspace}.plain_ceiling");
    session
        .query_unpaged(
            format!(
                "CREATE TABLE IF NOT EXISTS {table} (part text, seq text, v bigint, PRIMARY KEY (part, seq))"
            ),
            (),
        )
        .await?;
    let write = session
        .prepare(format!(
            "INSERT INTO {table} (part, seq, v) VALUES ('one', ?, ?) USING TIMESTAMP ?"
        ))
        .await?;
    drive(tasks, seconds, |task, deadline, done| {
        let (session, write) = (Arc::clone(&session), write.clone());
        async move {
            let mut n = 0i64;
            while Instant::now() < deadline {
                let ts = cql_workqueue::clock::next_micros();
                session
                    .execute_unpaged(&write, (format!("{task:04}-{n:012}"), n, ts))
                    .await?;
                n += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        }
    })
    .await
}

/// The error a task of [`drive`] ends with.
type TaskError = Box<dyn std::error::Error + Send + Sync>;

/// Runs `tasks` tasks made by `task(number, deadline, counter)` until `seconds` have passed,
/// and returns what they counted, per second.
async fn drive<F, T>(tasks: usize, seconds: u64, task: F) -> Result<f64, Box<dyn std::error::Error>>
where
    F: Fn(usize, Instant, Arc<AtomicU64>) -> T,
    T: std::future::Future<Output = Result<(), TaskError>> + Send + 'static,
{
    let counted = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let handles: Vec<_> = (0..tasks)
        .map(|n| tokio::spawn(task(n, deadline, Arc::clone(&counted))))
        .collect();
    for handle in handles {
        handle.await?.map_err(|e| e.to_string())?;
    }
    Ok(counted.load(Ordering::Relaxed) as f64 / seconds as f64)
}

/// LWTs a second that `tasks` tasks, each on a partition of its own, complete on the node at
/// `addr` over `seconds`, in the table `keyspace.lwt_ceiling` (created if missing).
///
/// # Errors
///
/// When the node cannot be reached, or a statement fails.
pub async fn measure(
    addr: &str,
    keyspace: &str,
    tasks: usize,
    seconds: u64,
) -> Result<f64, Box<dyn std::error::Error>> {
    let session = Arc::new(SessionBuilder::new().known_node(addr).build().await?);
    let table = format!("{keyspace}.lwt_ceiling");
    session
        .query_unpaged(
            format!("CREATE TABLE IF NOT EXISTS {table} (k int PRIMARY KEY, v bigint)"),
            (),
        )
        .await?;
    let insert = session
        .prepare(format!(
            "INSERT INTO {table} (k, v) VALUES (?, 0) IF NOT EXISTS"
        ))
        .await?;
    let read = session
        .prepare(format!("SELECT v FROM {table} WHERE k = ?"))
        .await?;
    let update = session
        .prepare(format!("UPDATE {table} SET v = ? WHERE k = ? IF v = ?"))
        .await?;
    i32::try_from(tasks)?;
    drive(tasks, seconds, |k, deadline, applied| {
        let (session, insert, read, update) = (
            Arc::clone(&session),
            insert.clone(),
            read.clone(),
            update.clone(),
        );
        let k = i32::try_from(k).unwrap_or(i32::MAX);
        async move {
            session.execute_unpaged(&insert, (k,)).await?;
            let rows = session
                .execute_unpaged(&read, (k,))
                .await?
                .into_rows_result()?;
            let mut v: i64 = rows
                .maybe_first_row::<Row>()?
                .and_then(|row| row.columns.into_iter().next().flatten())
                .and_then(|value| value.as_bigint())
                .unwrap_or(0);
            while Instant::now() < deadline {
                let result = session.execute_unpaged(&update, (v + 1, k, v)).await?;
                // `[applied]` first, then (when not applied) the current value.
                let won = result
                    .into_rows_result()?
                    .maybe_first_row::<Row>()?
                    .and_then(|row| row.columns.into_iter().next().flatten())
                    .and_then(|value| value.as_boolean())
                    .unwrap_or(false);
                if won {
                    v += 1;
                    applied.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok(())
        }
    })
    .await
}
