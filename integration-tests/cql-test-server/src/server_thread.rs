//! A server that runs apart from its caller: its own thread, driving a single-threaded Tokio
//! runtime until the server is dropped (`ServerOptions::own_thread`).

use tokio::runtime::{Builder, Handle};
use tokio::sync::oneshot;

use super::options::StartError;

/// The runtime the server's tasks run on; dropping it ends the thread and those tasks.
#[derive(Debug)]
pub(crate) struct ServerThread {
    handle: Handle,
    /// Dropped with the server: the thread's `block_on` then returns and its runtime, with
    /// every task of the server, is dropped.
    _stop: oneshot::Sender<()>,
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
        std::thread::Builder::new()
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
            _stop: stop,
        })
    }

    /// The runtime's handle: what the server spawns, from any thread, goes there.
    pub(crate) fn handle(&self) -> &Handle {
        &self.handle
    }
}
