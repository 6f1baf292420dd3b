//! The worst read a benchmark made, in tombstones walked: from the CQL test server's own
//! per-read counts, or from a Cassandra node's `nodetool tablestats` ("Maximum tombstones
//! per slice (last five minutes)", the node's histogram of what each read walked).

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Cassandra's default `tombstone_warn_threshold`: one read over it is a warning in the
/// node's log.
pub const WARN_THRESHOLD: u64 = 1_000;

/// Runs `nodetool` (a command line, split on spaces) for `keyspace.table` and reads the
/// table's "Maximum tombstones per slice (last five minutes)".
///
/// # Errors
///
/// When the command cannot run, fails, or prints no such line.
pub fn nodetool_max(nodetool: &str, keyspace: &str, table: &str) -> Result<u64, String> {
    let mut words = nodetool.split_whitespace();
    let program = words.next().ok_or("--nodetool is empty")?;
    let output = Command::new(program)
        .args(words)
        .args(["tablestats", &format!("{keyspace}.{table}")])
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{program} tablestats: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .find_map(|line| {
            let (label, value) = line.split_once(':')?;
            (label.trim() == "Maximum tombstones per slice (last five minutes)")
                .then(|| value.trim().parse::<f64>().ok())
                .flatten()
        })
        .map(|max| max as u64)
        .ok_or_else(|| "no \"Maximum tombstones per slice\" in nodetool's output".into())
}

/// Polls [`nodetool_max`] every `every` until dropped, keeping the highest figure seen (the
/// node's own figure covers five minutes only).
pub struct NodetoolWatch {
    max: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl NodetoolWatch {
    /// Starts polling.
    pub fn start(nodetool: String, keyspace: String, table: String, every: Duration) -> Self {
        let max = Arc::new(AtomicU64::new(0));
        let seen = Arc::clone(&max);
        let task = tokio::spawn(async move {
            loop {
                let (n, k, t) = (nodetool.clone(), keyspace.clone(), table.clone());
                match tokio::task::spawn_blocking(move || nodetool_max(&n, &k, &t)).await {
                    Ok(Ok(value)) => {
                        seen.fetch_max(value, Ordering::Relaxed);
                    }
                    Ok(Err(error)) => eprintln!("nodetool: {error}"),
                    Err(error) => eprintln!("nodetool: {error}"),
                }
                tokio::time::sleep(every).await;
            }
        });
        NodetoolWatch { max, task }
    }

    /// The highest "maximum tombstones per slice" seen so far, read once more now.
    pub async fn max(&self, nodetool: &str, keyspace: &str, table: &str) -> u64 {
        let (n, k, t) = (nodetool.to_owned(), keyspace.to_owned(), table.to_owned());
        if let Ok(Ok(value)) = tokio::task::spawn_blocking(move || nodetool_max(&n, &k, &t)).await {
            self.max.fetch_max(value, Ordering::Relaxed);
        }
        self.max.load(Ordering::Relaxed)
    }
}

impl Drop for NodetoolWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
