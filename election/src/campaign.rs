//! The handle of one candidate's campaign: a stream of events plus controls.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::actor::Command;
use crate::error::ElectionError;
use crate::event::ElectionEvent;

/// One candidate's campaign, run by a spawned actor. A [`Stream`](futures::Stream) of [`ElectionEvent`]s:
/// `Elected`, `Deposed` (always after the `Elected` of the same term), `LeaderChanged`.
///
/// While elected, [`Campaign::leading`] is `true` and [`Campaign::cancellation_token`] gives
/// the term's token; both flip before the lease can expire for anyone else. Dropping the
/// campaign resigns (best effort, in the background); [`Campaign::resign`] waits for it.
///
/// The stream need not be polled to keep leading: the actor renews the lease on its own, and
/// events wait, unread, in an unbounded buffer (at most one per term change or new leader
/// seen). A candidate that is not elected withdraws with [`Campaign::resign`] too: it stops
/// trying and the stream ends (after a `Deposed { reason: Resigned }` if it had just won).
///
/// # Cancel safety
/// The campaign runs in a spawned actor, so dropping a `next()` future loses no event and
/// leaves no claim behind: the actor settles every claim it sent (a lost answer is read back,
/// an answer after its deadline is given back without `Elected`). Dropping the `Campaign`
/// at any point releases whatever it holds.
///
/// ```
/// use std::sync::Arc;
/// use futures::StreamExt;
/// use cql_election::{Election, Timing, ElectionEvent};
/// use cql_lease::MemoryStore;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let election = Election::new(Arc::new(MemoryStore::new()), "scheduler", Timing::default())?;
/// let mut campaign = election.campaign("node-a", Some("10.0.0.1:7000"))?;
/// let Some(ElectionEvent::Elected { term, stop, .. }) = campaign.next().await else { unreachable!() };
/// assert!(campaign.is_leader() && !stop.is_cancelled());
/// campaign.proclaim(Some("10.0.0.1:7001")).await?;
/// assert_eq!(election.leader().await?.map(|l| l.term), Some(term));
/// campaign.resign().await?;
/// assert!(stop.is_cancelled());
/// assert!(matches!(campaign.next().await, Some(ElectionEvent::Deposed { .. })));
/// assert!(campaign.next().await.is_none()); // the campaign is over
/// # Ok::<(), cql_election::ElectionError>(())
/// # }).unwrap();
/// ```
pub struct Campaign {
    events: mpsc::UnboundedReceiver<ElectionEvent>,
    handle: CampaignHandle,
    shutdown: CancellationToken,
}

/// Controls of a [`Campaign`], cheap to clone: move the campaign's event stream to one task
/// and keep handles elsewhere. The campaign lives as long as its [`Campaign`] (the stream).
#[derive(Clone)]
pub struct CampaignHandle {
    commands: mpsc::Sender<Command>,
    leading: watch::Receiver<bool>,
    term: watch::Receiver<Option<Term>>,
    task: Arc<Mutex<Option<JoinHandle<()>>>>,
}

/// The current term's signals, published by the actor while leading.
#[derive(Clone)]
pub(crate) struct Term {
    pub stop: CancellationToken,
    pub deadline: watch::Receiver<Instant>,
}

impl std::fmt::Debug for Campaign {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Campaign")
            .field("leading", &self.is_leader())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for CampaignHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CampaignHandle")
            .field("leading", &self.is_leader())
            .finish_non_exhaustive()
    }
}

impl Campaign {
    pub(crate) fn new(
        events: mpsc::UnboundedReceiver<ElectionEvent>,
        commands: mpsc::Sender<Command>,
        leading: watch::Receiver<bool>,
        term: watch::Receiver<Option<Term>>,
        shutdown: CancellationToken,
        task: JoinHandle<()>,
    ) -> Self {
        let handle = CampaignHandle {
            commands,
            leading,
            term,
            task: Arc::new(Mutex::new(Some(task))),
        };
        Campaign {
            events,
            handle,
            shutdown,
        }
    }

    /// A cloneable handle to control this campaign.
    pub fn handle(&self) -> CampaignHandle {
        self.handle.clone()
    }

    /// See [`CampaignHandle::leading`].
    pub fn leading(&self) -> watch::Receiver<bool> {
        self.handle.leading()
    }

    /// See [`CampaignHandle::is_leader`].
    pub fn is_leader(&self) -> bool {
        self.handle.is_leader()
    }

    /// See [`CampaignHandle::cancellation_token`].
    pub fn cancellation_token(&self) -> Option<CancellationToken> {
        self.handle.cancellation_token()
    }

    /// See [`CampaignHandle::term_deadline`].
    pub fn term_deadline(&self) -> Option<watch::Receiver<Instant>> {
        self.handle.term_deadline()
    }

    /// See [`CampaignHandle::resign`].
    ///
    /// # Errors
    /// As [`CampaignHandle::resign`].
    ///
    /// # Cancel safety
    /// As [`CampaignHandle::resign`].
    pub async fn resign(&self) -> Result<(), ElectionError> {
        self.handle.resign().await
    }

    /// See [`CampaignHandle::proclaim`].
    ///
    /// # Errors
    /// As [`CampaignHandle::proclaim`].
    ///
    /// # Cancel safety
    /// As [`CampaignHandle::proclaim`].
    pub async fn proclaim(&self, value: Option<&str>) -> Result<(), ElectionError> {
        self.handle.proclaim(value).await
    }

    /// See [`CampaignHandle::abort`].
    ///
    /// # Cancel safety
    /// As [`CampaignHandle::abort`].
    pub async fn abort(&self) {
        self.handle.abort().await
    }
}

impl CampaignHandle {
    /// `true` while this candidate leads; turns `false` before the lease can expire for
    /// others (and before the term's token is cancelled).
    pub fn leading(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }

    /// Whether this candidate leads now.
    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// The current term's cancellation token, while leading.
    pub fn cancellation_token(&self) -> Option<CancellationToken> {
        self.term.borrow().as_ref().map(|t| t.stop.clone())
    }

    /// A watch of the current term's local deadline (monotonic clock), while leading: the
    /// instant by which the leader must have stopped acting unless a renewal moves it
    /// forward, as each successful renewal does. It is the same watch as the `deadline` of
    /// the term's [`ElectionEvent::Elected`], and keeps its last value after the term ends
    /// (the term's token is cancelled by then, at the deadline at the latest).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use futures::StreamExt;
    /// use cql_election::{Election, Timing, ElectionEvent};
    /// use cql_lease::MemoryStore;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().unwrap().block_on(async {
    /// let election = Election::new(Arc::new(MemoryStore::new()), "jobs", Timing::default())?;
    /// let mut campaign = election.campaign("node-a", None)?;
    /// let Some(ElectionEvent::Elected { must_stop_by, .. }) = campaign.next().await else { unreachable!() };
    /// let mut deadline = campaign.term_deadline().expect("leading");
    /// assert_eq!(*deadline.borrow(), must_stop_by);
    /// deadline.changed().await.expect("renewed"); // the first renewal moves it forward
    /// assert!(*deadline.borrow() > must_stop_by);
    /// campaign.resign().await?;
    /// assert!(campaign.term_deadline().is_none());
    /// # Ok::<(), cql_election::ElectionError>(())
    /// # }).unwrap();
    /// ```
    pub fn term_deadline(&self) -> Option<watch::Receiver<Instant>> {
        self.term.borrow().as_ref().map(|t| t.deadline.clone())
    }

    /// Gives up: releases the lease at once if leading (so another candidate can take over
    /// within one poll interval), ends the campaign, and waits for its actor to finish. The
    /// stream then yields the final `Deposed { reason: Resigned }` (if leading) and ends. A
    /// candidate that is following withdraws this way too: `Ok(())`, no event, the stream
    /// ends.
    ///
    /// # Errors
    /// [`ElectionError::CampaignEnded`] if the campaign had already ended; the release's
    /// error if leading and the release failed (the term's token is cancelled anyway, and
    /// the lease is bounded by its TTL).
    ///
    /// # Cancel safety
    /// Cancel-safe: the actor resigns once the command is sent, whether or not this future
    /// is still awaited; dropped before that, the campaign goes on (drop the [`Campaign`] to
    /// end it).
    pub async fn resign(&self) -> Result<(), ElectionError> {
        let (reply, answer) = oneshot::channel();
        let result = match self.commands.send(Command::Resign(reply)).await {
            Ok(()) => answer.await.unwrap_or(Err(ElectionError::CampaignEnded)),
            Err(_) => Err(ElectionError::CampaignEnded),
        };
        self.join().await;
        result
    }

    /// Replaces the leader's value (e.g. its address) without a new election: one LWT.
    /// `NotLeader` when following; the value is then used if this candidate wins later.
    ///
    /// # Errors
    /// [`ElectionError::NotLeader`] when following; [`ElectionError::CampaignEnded`] after the
    /// campaign ended; the renewal's error otherwise (the term goes on while it can renew).
    ///
    /// # Cancel safety
    /// Cancel-safe: the renewal runs in the keep-alive; once sent, the new value may or may
    /// not be written.
    pub async fn proclaim(&self, value: Option<&str>) -> Result<(), ElectionError> {
        cql_lease::check_owner_and_value("-", value)?;
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::Proclaim(value.map(str::to_owned), reply))
            .await
            .map_err(|_| ElectionError::CampaignEnded)?;
        answer.await.unwrap_or(Err(ElectionError::CampaignEnded))
    }

    /// Stops at once without releasing anything, as a crash would: the term's token is
    /// cancelled and the lease stays until its TTL. For tests and failure drills.
    ///
    /// # Cancel safety
    /// Cancel-safe: once the command is sent the actor stops whether or not this future is
    /// still awaited.
    pub async fn abort(&self) {
        let _ = self.commands.send(Command::Abort).await;
        self.join().await;
    }

    async fn join(&self) {
        let task = self.task.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

impl Stream for Campaign {
    type Item = ElectionEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ElectionEvent>> {
        self.events.poll_recv(cx)
    }
}

impl Drop for Campaign {
    fn drop(&mut self) {
        // The actor releases the lease (if held) and exits on its own.
        self.shutdown.cancel();
    }
}
