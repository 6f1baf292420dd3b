//! A server that runs apart from its caller's runtime: its own thread, driving a
//! single-threaded Tokio runtime until the server is dropped (`ServerOptions::own_thread`).

use tokio::runtime::{Builder, Handle};
use tokio::sync::oneshot;

use super::options::StartError;

/// The runtime the server's tasks run on; dropping it ends the thread and those tasks.
#[derive(Debug)]
pub(crate) struct ServerThread {
    handle: Handle,
    /// Dropped first: the thread's `block_on` then returns and its runtime, with every task
    /// of the server, is dropped.
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerThread {
    /// Starts the thread.
    pub(crate) fn spawn() -> Result<ServerThread, StartError> {
        let runtime = Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| StartError::Thread(e.to_string()))?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("cql-test-server".into())
            .spawn(move || {
                // A current-thread runtime runs its spawned tasks only inside `block_on`.
                runtime.block_on(async move {
                    let _ = stopped.await;
                });
            })
            .map_err(|e| StartError::Thread(e.to_string()))?;
        Ok(ServerThread {
            handle,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The runtime's handle: what the server spawns, from any thread, goes there.
    pub(crate) fn handle(&self) -> &Handle {
        &self.handle
    }
}

impl Drop for ServerThread {
    /// Waits for the thread, so the server's sockets are closed once the server is dropped
    /// (its runtime's shutdown only drops tasks: it never waits on the caller).
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::warn!("cql-test-server: its thread panicked");
        }
    }
}
