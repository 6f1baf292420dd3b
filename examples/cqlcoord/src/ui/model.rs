//! What the dashboard shows: the names it watches, read from the cluster as JSON.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cql_lease::namespace::Namespace;
use cql_lease::{LeaseClient, StoredLease};
use cql_workqueue::WorkQueue;
use futures::future::join_all;
use serde_json::{Value, json};

use super::queues::{self, QUEUE_READS, Summary};
use super::shared::Shared;

/// The names shown, from the command line.
#[derive(Debug, Clone, Default)]
pub struct Watched {
    /// Elections (`--election`).
    pub elections: Vec<String>,
    /// Lease locks (`--lock`).
    pub locks: Vec<String>,
    /// Plain leases (`--lease`).
    pub leases: Vec<String>,
    /// Work queues (`--queue`).
    pub queues: Vec<String>,
}

impl Watched {
    /// Requests one overview refresh sends at most: one SERIAL read per election, lock and
    /// lease, and [`QUEUE_READS`] per queue.
    pub fn overview_cost(&self) -> usize {
        self.elections.len()
            + self.locks.len()
            + self.leases.len()
            + QUEUE_READS * self.queues.len()
    }

    /// A queue page's cost, as its footer states it.
    pub fn queue_cost_text() -> String {
        format!(
            "Each refresh of this page sends at most {} requests to the cluster: at most \
             {QUEUE_READS} plain reads for the queue's counts and one item read per dead letter \
             shown (at most {}), whatever the queue holds. Open pages share reads: a read \
             answers every request for its page within half a refresh.",
            QUEUE_READS + queues::DEAD_SHOWN,
            queues::DEAD_SHOWN
        )
    }

    /// The overview's cost as the page footer and the docs state it.
    pub fn cost_text(&self) -> String {
        format!(
            "Each refresh of the overview sends at most {} requests to the cluster: one \
             SERIAL read per election ({}), lock ({}) and lease ({}), and at most \
             {QUEUE_READS} plain reads per queue ({}), whatever the queues hold. A queue's \
             page sends its queue's reads plus one item read per dead letter shown (at most \
             {}). Open pages share reads: a read answers every request for its page within \
             half a refresh.",
            self.overview_cost(),
            self.elections.len(),
            self.locks.len(),
            self.leases.len(),
            self.queues.len(),
            queues::DEAD_SHOWN
        )
    }
}

/// Where the dashboard reads from.
pub struct Sources {
    /// The names shown.
    pub watched: Watched,
    /// The lease store's client (`None` when no election, lock or lease is watched).
    pub leases: Option<LeaseClient>,
    /// The watched queues, by name.
    pub queues: BTreeMap<String, WorkQueue>,
    /// Per election, the term seen last and since when it has been seen (`None`: it was
    /// already there when the dashboard first looked).
    terms: Mutex<HashMap<String, (i64, Option<SystemTime>)>>,
    /// The overview's last read, shared by the requests that want it meanwhile.
    overview: Shared<Value>,
    /// Per queue, its page's last read, shared the same way.
    pages: BTreeMap<String, Shared<Result<Value, String>>>,
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

impl Sources {
    /// Sources for `watched`. A read answers every request for the same page that comes
    /// within `reuse` of it, and every one that comes while it is in flight.
    pub fn new(
        watched: Watched,
        leases: Option<LeaseClient>,
        queues: BTreeMap<String, WorkQueue>,
        reuse: Duration,
    ) -> Self {
        let pages = queues
            .keys()
            .map(|name| (name.clone(), Shared::new(reuse)))
            .collect();
        Sources {
            watched,
            leases,
            queues,
            terms: Mutex::default(),
            overview: Shared::new(reuse),
            pages,
        }
    }

    /// The overview, read at most once per `reuse` whatever the number of requests (see
    /// [`Sources::new`]).
    pub async fn overview(&self) -> Value {
        self.overview.get(|| self.read_overview()).await
    }

    /// Forgets the kept reads that show `queue` (after a write to it), so the next request
    /// reads it again.
    pub async fn forget(&self, queue: &str) {
        self.overview.forget().await;
        if let Some(page) = self.pages.get(queue) {
            page.forget().await;
        }
    }

    /// The overview: every watched name, read concurrently. A failed read shows as that
    /// entry's `error`; the overview itself never fails.
    async fn read_overview(&self) -> Value {
        let w = &self.watched;
        let elections = join_all(w.elections.iter().map(|n| self.election(n)));
        let locks = join_all(
            w.locks
                .iter()
                .map(|n| self.lease(Namespace::Lock, "lock", n)),
        );
        let leases = join_all(
            w.leases
                .iter()
                .map(|n| self.lease(Namespace::Lease, "lease", n)),
        );
        let queues = join_all(self.queues.iter().map(|(name, queue)| async move {
            match queues::summary(queue).await {
                Ok(summary) => queue_json(name, &summary),
                Err(e) => json!({"name": name, "error": one_line(&e)}),
            }
        }));
        let (elections, locks, leases, queues) = futures::join!(elections, locks, leases, queues);
        let mut holders = locks;
        holders.extend(leases);
        json!({
            "now_ms": unix_ms(SystemTime::now()),
            "elections": elections,
            "leases": holders,
            "queues": queues,
        })
    }

    async fn read(&self, namespace: Namespace, name: &str) -> Result<Option<StoredLease>, String> {
        let client = self.leases.as_ref().ok_or("no lease store")?;
        client
            .in_namespace(namespace)
            .holder(name)
            .await
            .map_err(|e| one_line(&e))
    }

    async fn election(&self, name: &str) -> Value {
        let holder = match self.read(Namespace::Election, name).await {
            Ok(holder) => holder,
            Err(error) => return json!({"name": name, "error": error}),
        };
        let Some(h) = holder else {
            return json!({"name": name, "leader": null});
        };
        let since = self.term_seen(name, h.token.get());
        json!({
            "name": name,
            "leader": h.owner,
            "term": h.token.get().to_string(),
            "value": h.value,
            "expires_within_secs": secs(h.expires_within),
            "since_ms": since.map(unix_ms),
        })
    }

    /// When the dashboard first saw `term` lead `name` (`None`: at its first look, so the
    /// term may be older).
    fn term_seen(&self, name: &str, term: i64) -> Option<SystemTime> {
        let Ok(mut terms) = self.terms.lock() else {
            return None;
        };
        let first_look = !terms.contains_key(name);
        let entry = terms
            .entry(name.to_owned())
            .or_insert((term, (!first_look).then(SystemTime::now)));
        if entry.0 != term {
            *entry = (term, Some(SystemTime::now()));
        }
        entry.1
    }

    async fn lease(&self, namespace: Namespace, kind: &str, name: &str) -> Value {
        match self.read(namespace, name).await {
            Err(error) => json!({"name": name, "kind": kind, "error": error}),
            Ok(None) => json!({"name": name, "kind": kind, "holder": null}),
            Ok(Some(h)) => json!({
                "name": name,
                "kind": kind,
                "holder": h.owner,
                "token": h.token.get().to_string(),
                "value": h.value,
                "expires_within_secs": secs(h.expires_within),
            }),
        }
    }

    /// A watched queue's counts and its first dead letters, or `None` when it is not watched;
    /// read at most once per `reuse` whatever the number of requests (see [`Sources::new`]).
    ///
    /// # Errors
    /// A read failed (one line).
    pub async fn queue(&self, name: &str) -> Option<Result<Value, String>> {
        let (queue, page) = (self.queues.get(name)?, self.pages.get(name)?);
        Some(page.get(|| Self::read_queue(name, queue)).await)
    }

    async fn read_queue(name: &str, queue: &WorkQueue) -> Result<Value, String> {
        let summary = queues::summary(queue).await.map_err(|e| one_line(&e))?;
        let letters = queues::letters(queue, &summary.dead_ids)
            .await
            .map_err(|e| one_line(&e))?;
        let mut value = queue_json(name, &summary);
        value["dead_letters"] = letters
            .iter()
            .map(|l| {
                json!({"id": l.id.as_str(), "attempts": l.attempts,
                       "last_error": l.last_error, "payload": l.payload})
            })
            .collect();
        value["now_ms"] = json!(unix_ms(SystemTime::now()));
        Ok(value)
    }
}

fn queue_json(name: &str, s: &Summary) -> Value {
    json!({
        "name": name,
        "available": s.available,
        "scheduled": s.scheduled,
        "running": s.running,
        "dead": s.dead,
        "oldest_available_age_secs": s.oldest_available_age.map(secs),
        "cursor_lag_secs": s.cursor_lag.map(secs),
        "complete": s.complete,
    })
}

/// An error as one line (the driver's messages may span several).
pub fn one_line(e: &dyn std::fmt::Display) -> String {
    crate::error::CliError::store(e).message
}
