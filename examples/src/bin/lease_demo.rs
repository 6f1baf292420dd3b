//! Leases contended, expiring and fencing a write, on the embedded store by default or on a
//! cluster with `--scylla HOST:PORT`. Prints every acquisition with its token, and what each
//! operation cost in store round trips.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cql_lease::{CountingStore, FencingToken, LeaseClient, Timing, TryAcquire};
use examples::{Flags, ScyllaFlag};
use tokio::time::Instant;

/// A resource that remembers the highest token that wrote to it, and refuses older ones.
#[derive(Default)]
struct FencedFile {
    highest: Option<FencingToken>,
    lines: Vec<String>,
}

impl FencedFile {
    fn write(&mut self, token: FencingToken, line: &str) -> Result<(), String> {
        if self.highest.is_some_and(|h| token < h) {
            return Err(format!(
                "token {token} is older than {}",
                self.highest.unwrap_or(token)
            ));
        }
        self.highest = Some(token);
        self.lines.push(line.to_owned());
        Ok(())
    }
}

/// The command line (see the module documentation).
#[derive(Debug, clap::Parser)]
#[command(about = "Leases contended, expiring and fencing a write, on the embedded store or a cluster.", long_about = None)]
struct Cli {
    #[command(flatten)]
    target: ScyllaFlag,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let target = <Cli as clap::Parser>::parse().target.target();
    let store = Arc::new(CountingStore::new(target.open().await?));
    let config = Timing {
        lease_duration: Duration::from_secs(2),
        renew_period: Duration::from_millis(500),
        retry_period: Duration::from_millis(200),
        max_clock_skew: Duration::ZERO,
        ..Timing::default()
    };
    let client = LeaseClient::new(store.clone(), config)?;
    let started = Instant::now();
    let at = move || format!("{:>6.2}s", started.elapsed().as_secs_f64());
    let name = format!("demo-{}", std::process::id());
    println!(
        "backend: {target:?}; lease {name:?}; ttl {:?}; a holder acts for {:?} after each renewal",
        config.lease_duration,
        config.renew_deadline()
    );

    println!("\n== 1. five workers race for the lease");
    let mut tasks = Vec::new();
    for worker in 1..=5 {
        let (client, name) = (client.clone(), name.clone());
        tasks.push(tokio::spawn(async move {
            client
                .try_acquire(&name, &format!("worker-{worker}"), Some("10.0.0.1:8080"))
                .await
        }));
    }
    let mut winner = None;
    for (i, task) in tasks.into_iter().enumerate() {
        match task.await?? {
            TryAcquire::Acquired(lease) => {
                println!("{} worker-{} ACQUIRED token {}", at(), i + 1, lease.token());
                winner = Some(lease);
            }
            TryAcquire::Held(h) => println!(
                "{} worker-{} sees it held by {} (token {}, expires within {:?})",
                at(),
                i + 1,
                h.owner,
                h.token,
                h.expires_within
            ),
        }
    }
    let winner = winner.ok_or("nobody acquired the lease")?;

    println!("\n== 2. the holder is paused past its TTL; a newer holder fences it out");
    let file = Arc::new(Mutex::new(FencedFile::default()));
    let old_token = winner.token();
    file.lock()
        .map_err(|_| "poisoned")?
        .write(old_token, "first write")?;
    println!(
        "{} {} writes with token {old_token}: accepted",
        at(),
        winner.owner()
    );
    println!(
        "{} {} pauses (GC, swap, stalled VM) and stops renewing...",
        at(),
        winner.owner()
    );
    let successor = client
        .acquire(&name, "worker-9", None, Some(Duration::from_secs(10)))
        .await?;
    println!(
        "{} worker-9 ACQUIRED token {} after the expiry",
        at(),
        successor.token()
    );
    file.lock()
        .map_err(|_| "poisoned")?
        .write(successor.token(), "successor write")?;
    println!(
        "{} worker-9 writes with token {}: accepted",
        at(),
        successor.token()
    );
    println!(
        "{} {} wakes up; is_valid() = {}",
        at(),
        winner.owner(),
        winner.is_valid()
    );
    match file
        .lock()
        .map_err(|_| "poisoned")?
        .write(old_token, "stale write")
    {
        Ok(()) => return Err("the fence let a stale write through".into()),
        Err(e) => println!(
            "{} {} writes with token {old_token}: REJECTED ({e})",
            at(),
            winner.owner()
        ),
    }
    successor.release().await?;
    println!("{} worker-9 released", at());

    println!(
        "\n== 3. keep-alive: the lease outlives its TTL while renewed, and is handed over on release"
    );
    let guard = client
        .acquire(&name, "worker-3", None, None)
        .await?
        .keep_alive();
    println!(
        "{} worker-3 ACQUIRED token {} with keep-alive",
        at(),
        guard.token()
    );
    tokio::time::sleep(config.lease_duration * 2).await;
    println!(
        "{} worker-3 still holds it after {} renewals",
        at(),
        guard.renewals()
    );
    let waiter = {
        let (client, name) = (client.clone(), name.clone());
        tokio::spawn(async move { client.acquire(&name, "worker-4", None, None).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let last = guard.token();
    guard.release().await?;
    let next = waiter.await??;
    println!(
        "{} worker-4 ACQUIRED token {} (> {last}) right after the release",
        at(),
        next.token()
    );
    next.release().await?;

    println!("\n== 4. cost of each operation, in store round trips");
    let other = LeaseClient::new(store.clone(), config)?;
    let before = store.calls();
    let TryAcquire::Acquired(mut lease) = other.try_acquire(&name, "worker-5", None).await? else {
        return Err("expected a free lease".into());
    };
    let report = |what: &str, before| {
        let d = store.calls().since(before);
        println!("  {what:<28} {} LWT, {} read", d.writes(), d.read);
    };
    report("uncontended acquire", before);
    let before = store.calls();
    other.try_acquire(&name, "worker-6", None).await?;
    report("contended try_acquire", before);
    let before = store.calls();
    lease.renew().await?;
    report("renew", before);
    let before = store.calls();
    other.holder(&name).await?;
    report("holder", before);
    let before = store.calls();
    lease.release().await?;
    report("release", before);
    println!("\ndone in {}", at());
    Ok(())
}
