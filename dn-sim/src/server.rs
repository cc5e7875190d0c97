//! Binding, serving and stopping dn-sim: in the `dn-sim` binary, inside tests, and embedded in
//! loadgen on a runtime of its own.

use crate::containers::ContainerIds;
use crate::dispatcher::Dispatcher;
use crate::service::XceiverService;
use crate::store::{ContainerStore, StoreKind};
use anyhow::Context;
use common::proto::xceiver_client_protocol_service_server::XceiverClientProtocolServiceServer;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;

/// Everything dn-sim needs to run, already validated.
#[derive(Clone, Debug)]
pub struct Config {
    /// Address of the client port (the DataNode's 9859).
    pub listen: SocketAddr,
    /// Pre-created containers (OPEN).
    pub containers: ContainerIds,
    /// Where block data goes: memory, discard or a directory (`--store`).
    pub store: StoreKind,
    /// Bytes of block data the store may hold before writes get DISK_OUT_OF_SPACE.
    pub capacity: u64,
    /// Verify the checksums of written chunks (`hdds.datanode.chunk.data.validation.check`).
    pub verify_checksums: bool,
    /// How long a shutdown waits for in-flight requests and open streams.
    pub shutdown_grace: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([0, 0, 0, 0], common::DEFAULT_PORT)),
            containers: ContainerIds::single(1),
            store: StoreKind::Memory,
            capacity: crate::store::DEFAULT_CAPACITY,
            verify_checksums: false,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

impl Config {
    /// A config for tests and embedding: loopback, a free port.
    pub fn loopback() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            ..Self::default()
        }
    }
}

/// A server serving on the current tokio runtime.
pub struct RunningServer {
    local_addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
    grace: Duration,
}

/// Binds `config.listen` and starts serving on the current runtime.
pub async fn start(config: Config) -> anyhow::Result<RunningServer> {
    let incoming = TcpIncoming::bind(config.listen)
        .with_context(|| format!("cannot listen on {}", config.listen))?
        // TCP_NODELAY must be set here: tonic ignores Server::tcp_nodelay with serve_with_incoming,
        // and without it small answers stall ~40 ms on delayed ACKs.
        .with_nodelay(Some(true));
    let local_addr = incoming.local_addr()?;
    let verifier = config
        .verify_checksums
        .then(crate::store::verify::default_verifier);
    let store = ContainerStore::new(config.store.clone(), config.capacity, verifier)
        .with_context(|| format!("cannot use --store {}", config.store))?;
    store.precreate(&config.containers);
    let dispatcher = Arc::new(Dispatcher::new(Arc::new(store)));
    let service = XceiverClientProtocolServiceServer::new(XceiverService::new(dispatcher))
        .max_decoding_message_size(common::MAX_MESSAGE_SIZE)
        .max_encoding_message_size(common::MAX_MESSAGE_SIZE);
    let (tx, rx) = oneshot::channel::<()>();
    let router = Server::builder()
        .initial_stream_window_size(Some(8 << 20))
        .initial_connection_window_size(Some(32 << 20))
        .add_service(service);
    let task = tokio::spawn(router.serve_with_incoming_shutdown(incoming, async {
        let _ = rx.await;
    }));
    Ok(RunningServer {
        local_addr,
        shutdown: Some(tx),
        task,
        grace: config.shutdown_grace,
    })
}

impl RunningServer {
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting, lets in-flight requests finish for up to the grace period, then stops.
    /// Returns whether everything finished within the grace period.
    pub async fn shutdown(mut self) -> bool {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        match tokio::time::timeout(self.grace, &mut self.task).await {
            Ok(_) => true,
            Err(_) => {
                self.task.abort();
                false
            }
        }
    }
}

/// dn-sim on a runtime and thread of its own, so that a process embedding it (loadgen without
/// `--target`) does not share executor threads with it.
pub struct EmbeddedServer {
    local_addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EmbeddedServer {
    pub fn start(config: Config, worker_threads: usize) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(worker_threads.max(1))
            .thread_name("dn-sim")
            .enable_all()
            .build()?;
        let server = runtime.block_on(start(config))?;
        let local_addr = server.local_addr();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("dn-sim-main".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let _ = stopped.await;
                    server.shutdown().await;
                });
            })?;
        Ok(Self {
            local_addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }
}

impl Drop for EmbeddedServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Runs until SIGINT or SIGTERM, then shuts down gracefully.
pub async fn run_until_signal(config: Config) -> anyhow::Result<()> {
    let server = start(config).await?;
    tracing::info!(addr = %server.local_addr(), "dn-sim serving XceiverClientProtocolService");
    wait_for_signal().await;
    tracing::info!("shutting down: no new connections, finishing in-flight requests");
    if !server.shutdown().await {
        tracing::warn!("grace period over; closing remaining streams");
    }
    Ok(())
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing a SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
