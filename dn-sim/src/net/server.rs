//! Binding, serving and stopping dn-sim: in the `dn-sim` binary, inside tests, and embedded in
//! loadgen on a runtime of its own.

use crate::datanode::container_ids::ContainerIds;
use crate::datanode::store::{ContainerStore, StoreKind};
use crate::net::admin::{self, StaticInfo};
use crate::net::grpc_service::{ConnectionInfo, XceiverService};
use crate::net::reset::ResetLayer;
use crate::net::tls::ServerStream;
use crate::sim::admission::{Admission, AdmissionConfig, LiveSettings, NodeIdentity};
use crate::sim::delay::DelaySpec;
use crate::sim::metrics::Metrics;
use crate::sim::rng::RngFactory;
use crate::sim::service_limits::{LimitPolicy, LimitRates};
use anyhow::Context;
use common::proto::xceiver_client_protocol_service_server::XceiverClientProtocolServiceServer;
use futures_util::StreamExt;
use futures_util::future::Either;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;
use tonic::transport::Server;
use tonic::transport::server::{Connected, TcpIncoming};

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
    /// `--sync` (`hdds.container.chunk.write.sync`): with `dir:`, answer writes once durable.
    pub sync: bool,
    /// Verify the checksums of written chunks (`hdds.datanode.chunk.data.validation.check`).
    pub verify_checksums: bool,
    /// How long a shutdown waits for in-flight requests and open streams.
    pub shutdown_grace: Duration,
    /// Handlers serving requests (the DataNode's gRPC worker pool).
    pub handler_count: usize,
    /// Bound of the queue of requests waiting for a handler; `None` = unbounded, as in the DataNode.
    pub max_queue: Option<usize>,
    /// Delays and faults (changeable at run time).
    pub live: LiveSettings,
    /// Seed of every random draw (delays, faults, disk latency).
    pub seed: u64,
    /// Shared device bandwidth for chunk data, bytes per second.
    pub disk_bandwidth: Option<f64>,
    /// Per-access latency of the shared device.
    pub disk_latency: Option<DelaySpec>,
    /// The Ratis path's log device and executors (`sim::raft`).
    pub raft: crate::sim::raft::RaftConfig,
    /// Address of the HTTP listener for `/prom`, `/metrics` and `/config`; `None` = none.
    pub metrics_listen: Option<SocketAddr>,
    /// Service limits (ingress, egress, ops) and how rejections look.
    pub limit_rates: LimitRates,
    pub limit_policy: LimitPolicy,
    /// The DataNode's UUID: requests for EC replicas (`replicaIndex` > 0) must name it.
    pub datanode_uuid: String,
    /// The Ozone release whose answers dn-sim gives where releases differ.
    pub ozone_version: crate::datanode::version::OzoneVersion,
    /// Connection and HTTP/2 limits (`net::connection`).
    pub connections: crate::net::connection::ConnectionLimits,
    /// TLS on the client port (`--tls-cert`); `None` = plain text.
    pub tls: Option<crate::net::tls::ServerTls>,
    /// Bytes of requests and answers in flight before new requests are refused (`crate::net::inflight_budget`).
    pub max_inflight_bytes: u64,
    /// Bound of the store's metadata (`store::bounds`); `None`: `capacity`, at least 64 MiB.
    pub metadata_capacity: Option<u64>,
    /// Address of the Ratis client port (the DataNode's 9858); `None` = none.
    pub ratis_listen: Option<SocketAddr>,
    /// Address of the Ratis admin port (`hdds.container.ratis.admin.port`, 9857: `groupList`,
    /// `groupInfo`); served only beside the client port; `None` = none.
    pub ratis_admin_listen: Option<SocketAddr>,
    /// The Raft groups (pipelines) this DataNode hosts on its Ratis port, one node each.
    pub pipelines: Vec<uuid::Uuid>,
    /// `--profile`: the costs of the DataNode's stages (`sim::stages`); `None` = none.
    pub profile: Option<crate::sim::profile::Profile>,
    /// The SCM to register with and heartbeat to (`--scm`); `None` = none.
    pub scm: Option<crate::net::scm::ScmConfig>,
    /// Data volumes (`--volumes`): the node report lists one storage report each.
    pub volumes: u32,
}

/// The pipeline (Raft group) dn-sim hosts unless `--pipeline-id` says otherwise: fixed, so that
/// a client configured once keeps working across restarts.
pub const DEFAULT_PIPELINE_ID: uuid::Uuid =
    uuid::Uuid::from_u128(0x0000_0000_0000_4000_8000_0000_0000_9858);

/// The UUID dn-sim has unless `--datanode-uuid` says otherwise: fixed, so that a restarted dn-sim
/// is the same DataNode (a real one keeps its UUID in `datanode.id`).
pub use crate::datanode::keyvalue::DEFAULT_DATANODE_UUID;

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([0, 0, 0, 0], common::DEFAULT_PORT)),
            containers: ContainerIds::single(1),
            store: StoreKind::Memory,
            capacity: crate::datanode::store::DEFAULT_CAPACITY,
            sync: false,
            verify_checksums: false,
            shutdown_grace: Duration::from_secs(10),
            handler_count: crate::sim::admission::DEFAULT_HANDLER_COUNT,
            max_queue: None,
            live: LiveSettings::default(),
            seed: 0x0d15_ea5e,
            disk_bandwidth: None,
            disk_latency: None,
            raft: crate::sim::raft::RaftConfig::default(),
            metrics_listen: Some(SocketAddr::from(([127, 0, 0, 1], 9882))),
            limit_rates: LimitRates::default(),
            limit_policy: LimitPolicy::default(),
            datanode_uuid: DEFAULT_DATANODE_UUID.to_string(),
            ozone_version: crate::datanode::version::OzoneVersion::default(),
            connections: Default::default(),
            tls: None,
            max_inflight_bytes: crate::net::inflight_budget::DEFAULT_MAX_INFLIGHT_BYTES,
            metadata_capacity: None,
            ratis_listen: Some(SocketAddr::from((
                [0, 0, 0, 0],
                common::ratis::DEFAULT_RATIS_PORT,
            ))),
            ratis_admin_listen: Some(SocketAddr::from((
                [0, 0, 0, 0],
                common::ratis::DEFAULT_RATIS_ADMIN_PORT,
            ))),
            pipelines: vec![DEFAULT_PIPELINE_ID],
            profile: None,
            scm: None,
            volumes: 1,
        }
    }
}

impl Config {
    /// What [`Admission`] is made of: the node, the pool, the live settings, the disk and the
    /// service limits.
    pub fn admission(&self) -> AdmissionConfig {
        AdmissionConfig {
            node: NodeIdentity {
                datanode_uuid: self.datanode_uuid.clone(),
                version: self.ozone_version,
            },
            handler_count: self.handler_count,
            max_queue: self.max_queue,
            live: self.live.clone(),
            disk_bandwidth: self.disk_bandwidth,
            disk_latency: self.disk_latency.clone(),
            limit_rates: self.limit_rates,
            limit_policy: self.limit_policy,
            profile: self.profile.clone(),
        }
    }

    /// A config for tests and embedding: loopback, a free port, no HTTP listener.
    pub fn loopback() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            metrics_listen: None,
            ratis_listen: None,
            ratis_admin_listen: None,
            ..Self::default()
        }
    }
}

/// Sets glibc's allocator up for dn-sim's large messages; the `dn-sim` binary calls it first
/// thing (not the library: a process embedding dn-sim keeps its own allocator settings).
///
/// tonic decodes each request into a buffer of its own, allocated when the message's length is
/// read; a 4 MB WriteChunk's buffer is above glibc's default mmap threshold or, once that has
/// adapted, above its trim threshold, so it was often mapped fresh (up to 1,024 page faults, each
/// a zeroed page) and unmapped again: with 4 writers, 128 page faults per MB received and a fifth
/// of dn-sim's CPU. With the mmap threshold at its maximum (32 MiB, Ozone's largest chunk) and a
/// 256 MiB trim threshold, freed message buffers are reused (3 faults per MB). The price: up to
/// 256 MiB per malloc arena stays resident after a burst of large messages, and a response
/// buffer that grows while it is encoded is moved by memcpy instead of mremap (until the encoder
/// reserves the message's length up front).
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::ffi::c_int;
        unsafe extern "C" {
            fn mallopt(param: c_int, value: c_int) -> c_int;
        }
        const M_TRIM_THRESHOLD: c_int = -1;
        const M_MMAP_THRESHOLD: c_int = -3;
        // SAFETY: mallopt only changes allocator parameters; it is called before any thread is
        // started and with values glibc accepts (it returns 0 and changes nothing otherwise).
        unsafe {
            mallopt(M_MMAP_THRESHOLD, 32 << 20);
            mallopt(M_TRIM_THRESHOLD, 256 << 20);
        }
    }
}

/// A server serving on the current tokio runtime.
pub struct RunningServer {
    local_addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    ratis_addr: Option<SocketAddr>,
    ratis_admin_addr: Option<SocketAddr>,
    admission: Arc<Admission>,
    scm: Arc<crate::net::scm::ScmStatus>,
    shutdown: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
    background: Vec<tokio::task::JoinHandle<()>>,
    grace: Duration,
}

/// Binds `config.listen` (and `config.metrics_listen`) and starts serving on the current runtime.
pub async fn start(config: Config) -> anyhow::Result<RunningServer> {
    let store = open_store(&config)?;
    start_with_store(config, store).await
}

/// Opens `config.store` with its capacity, metadata bound and pre-created containers.
pub fn open_store(config: &Config) -> anyhow::Result<Arc<ContainerStore>> {
    let verifier = config
        .verify_checksums
        .then(crate::datanode::store::verify::default_verifier);
    let store = ContainerStore::open(config.store.clone(), config.capacity, verifier, config.sync)
        .with_context(|| format!("cannot use --store {}", config.store))?;
    if let Some(bytes) = config.metadata_capacity {
        store.set_metadata_capacity(bytes);
    }
    store.precreate(&config.containers);
    Ok(Arc::new(store))
}

/// [`start`] with a store already open: a DataNode of `net::fleet` started again keeps its
/// containers, as a real one keeps its disks.
pub async fn start_with_store(
    config: Config,
    store: Arc<ContainerStore>,
) -> anyhow::Result<RunningServer> {
    let admission =
        Arc::new(Admission::from_config(store, config.admission()).context("--disk-bandwidth")?);
    let incoming = crate::net::connection::bind(config.listen, config.connections.so_backlog)
        .map(TcpIncoming::from)
        .with_context(|| format!("cannot listen on {}", config.listen))?
        // TCP_NODELAY must be set here: tonic ignores Server::tcp_nodelay with serve_with_incoming,
        // and without it small answers stall ~40 ms on delayed ACKs.
        .with_nodelay(Some(true));
    let local_addr = incoming.local_addr()?;
    let counted = {
        let d = Arc::clone(&admission);
        let count = move |io: std::io::Result<ServerStream>| {
            io.map(|stream| CountedConnection::new(stream, Arc::clone(&d)))
        };
        match &config.tls {
            None => Either::Left(incoming.map(move |io| count(io.map(ServerStream::Plain)))),
            Some(tls) => {
                let server_config = tls.server_config().map_err(anyhow::Error::msg)?;
                let d = Arc::clone(&admission);
                let failed: crate::net::tls::OnHandshakeFailure =
                    Arc::new(move |reason| d.metrics.tls_handshake_failed(reason));
                Either::Right(
                    crate::net::tls::handshakes(
                        incoming,
                        server_config,
                        tls.handshake_timeout,
                        config.connections.max_connections,
                        failed,
                    )
                    .map(count),
                )
            }
        }
    };
    let counted = crate::net::connection::guard(
        counted,
        config.connections.clone(),
        crate::net::connection::ConnectionMetrics::register(admission.metrics.recorder()),
    );

    let mut background = Vec::new();
    let metrics_addr = match config.metrics_listen {
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr} (--metrics-listen)"))?;
            let bound = listener.local_addr()?;
            let info = StaticInfo {
                listen: local_addr.to_string(),
                containers: config.containers.to_string(),
                seed: config.seed,
            };
            let app = admin::router(Arc::clone(&admission), info);
            background.push(tokio::spawn(async move {
                if let Err(e) = axum::serve(listener, app).await {
                    tracing::error!("metrics listener failed: {e}");
                }
            }));
            Some(bound)
        }
        None => None,
    };
    // Histogram samples are folded into buckets every few seconds, so memory stays bounded
    // however rarely Prometheus scrapes.
    let d = Arc::clone(&admission);
    background.push(tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        loop {
            tick.tick().await;
            d.metrics.upkeep();
        }
    }));

    let service = XceiverClientProtocolServiceServer::new(XceiverService::new(
        Arc::clone(&admission),
        RngFactory::new(config.seed),
    ))
    .max_decoding_message_size(common::MAX_MESSAGE_SIZE)
    .max_encoding_message_size(common::MAX_MESSAGE_SIZE);
    let budget = crate::net::inflight_budget::InflightBudget::new(
        config.max_inflight_bytes,
        &admission.metrics,
    );
    {
        let budget = Arc::clone(&budget);
        admission.metrics.on_scrape(move || budget.refresh());
    }
    let (ratis_addr, ratis_admin_addr, raft_groups) = match config.ratis_listen {
        Some(addr) => start_ratis(&config, addr, &admission, &mut background).await?,
        None => (None, None, None),
    };
    let scm = Arc::new(crate::net::scm::ScmStatus::default());
    if let Some(scm_config) = &config.scm {
        let node = crate::net::scm::reports::NodeIdentity {
            uuid: config
                .datanode_uuid
                .parse()
                .context("the DataNode's UUID")?,
            hostname: scm_config.hostname.clone(),
            ip_address: if local_addr.ip().is_unspecified() {
                "127.0.0.1".to_owned()
            } else {
                local_addr.ip().to_string()
            },
            ports: [
                ("STANDALONE", Some(local_addr)),
                ("RATIS", ratis_addr),
                ("RATIS_ADMIN", ratis_admin_addr),
                ("HTTP", metrics_addr),
            ]
            .into_iter()
            .filter_map(|(name, addr)| addr.map(|a| (name, a.port())))
            .collect(),
            version: config.ozone_version.release(),
            setup_time_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64),
            volumes: config.volumes,
            network_name: None,
            network_location: None,
        };
        let endpoint = crate::net::scm::endpoint::Endpoint::new(
            scm_config.clone(),
            node,
            Arc::clone(admission.store()),
            Arc::clone(&scm),
            raft_groups.clone(),
            Arc::clone(&admission),
        );
        background.push(tokio::spawn(endpoint.run()));
    }
    let (tx, rx) = oneshot::channel::<()>();
    let router = crate::net::connection::http2_limits(Server::builder(), &config.connections)
        .layer(ResetLayer)
        .layer(crate::net::inflight_budget::InflightLayer(budget))
        .add_service(crate::net::health::service().await)
        .add_service(service);
    let task = tokio::spawn(router.serve_with_incoming_shutdown(counted, async {
        let _ = rx.await;
    }));
    Ok(RunningServer {
        local_addr,
        metrics_addr,
        ratis_addr,
        ratis_admin_addr,
        admission,
        scm,
        shutdown: Some(tx),
        task,
        background,
        grace: config.shutdown_grace,
    })
}

/// Binds the Ratis client port and serves it (plain text, the DataNode's HTTP/2 limits) until
/// the process ends: a task of `background`. Returns its address, the admin port's, and the
/// hosted groups (which SCM's commands change).
async fn start_ratis(
    config: &Config,
    addr: SocketAddr,
    admission: &Arc<Admission>,
    background: &mut Vec<tokio::task::JoinHandle<()>>,
) -> anyhow::Result<(
    Option<SocketAddr>,
    Option<SocketAddr>,
    Option<Arc<crate::net::raft_groups::RaftGroups>>,
)> {
    use common::ratis::proto::grpc::raft_client_protocol_service_server::RaftClientProtocolServiceServer;
    let incoming = crate::net::connection::bind(addr, config.connections.so_backlog)
        .map(TcpIncoming::from)
        .with_context(|| format!("cannot listen on {addr} (--ratis-listen)"))?
        .with_nodelay(Some(true));
    let bound = incoming.local_addr()?;
    let log_worker = config.profile.as_ref().and_then(|p| p.ratis_log);
    let raft = Arc::new(
        crate::sim::raft::RaftModel::new(&config.raft, log_worker)
            .context("--raft-log-bandwidth")?,
    );
    let groups = Arc::new(crate::net::raft_groups::RaftGroups::new(
        &config.pipelines,
        &config.datanode_uuid,
        bound.to_string(),
        Arc::clone(&raft),
        Arc::clone(admission),
    ));
    let admin_addr = match config.ratis_admin_listen {
        Some(addr) => Some(
            start_ratis_admin(config, addr, Arc::clone(&groups), background)
                .with_context(|| format!("cannot listen on {addr} (--ratis-admin-listen)"))?,
        ),
        None => None,
    };
    let service =
        RaftClientProtocolServiceServer::new(crate::net::ratis_service::RatisService::new(
            Arc::clone(admission),
            Arc::clone(&groups),
            raft,
            config.raft.message_size_max,
            RngFactory::new(config.seed).fork("ratis"),
            config.datanode_uuid.clone(),
        ))
        .max_decoding_message_size(config.raft.message_size_max)
        .max_encoding_message_size(config.raft.message_size_max);
    // ResetLayer: an over-limit request on a stream that has answered is reset, not answered.
    let router = crate::net::connection::http2_limits(Server::builder(), &config.connections)
        .layer(ResetLayer)
        .add_service(service);
    background.push(tokio::spawn(async move {
        if let Err(e) = router.serve_with_incoming(incoming).await {
            tracing::error!("Ratis listener failed: {e}");
        }
    }));
    Ok((Some(bound), admin_addr, Some(groups)))
}

/// Binds the Ratis admin port and serves `AdminProtocolService` for the hosted groups.
fn start_ratis_admin(
    config: &Config,
    addr: SocketAddr,
    groups: Arc<crate::net::raft_groups::RaftGroups>,
    background: &mut Vec<tokio::task::JoinHandle<()>>,
) -> anyhow::Result<SocketAddr> {
    use common::ratis::proto::grpc::admin_protocol_service_server::AdminProtocolServiceServer;
    let incoming = crate::net::connection::bind(addr, config.connections.so_backlog)
        .map(TcpIncoming::from)?
        .with_nodelay(Some(true));
    let bound = incoming.local_addr()?;
    let service = AdminProtocolServiceServer::new(crate::net::ratis_admin::RatisAdmin::new(
        groups,
        &config.datanode_uuid,
    ));
    let router = crate::net::connection::http2_limits(Server::builder(), &config.connections)
        .add_service(service);
    background.push(tokio::spawn(async move {
        if let Err(e) = router.serve_with_incoming(incoming).await {
            tracing::error!("Ratis admin listener failed: {e}");
        }
    }));
    Ok(bound)
}

impl RunningServer {
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Where the Ratis client port listens, if anywhere.
    pub fn ratis_addr(&self) -> Option<SocketAddr> {
        self.ratis_addr
    }

    /// Where the Ratis admin port listens (`Config::ratis_admin_listen`), if anywhere.
    pub fn ratis_admin_addr(&self) -> Option<SocketAddr> {
        self.ratis_admin_addr
    }

    /// Where `/prom`, `/metrics` and `/config` are served, if anywhere.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    pub fn metrics(&self) -> &Metrics {
        &self.admission.metrics
    }

    pub fn admission(&self) -> &Arc<Admission> {
        &self.admission
    }

    /// What the client of SCM (`Config::scm`) has done so far.
    pub fn scm_status(&self) -> &Arc<crate::net::scm::ScmStatus> {
        &self.scm
    }

    /// [`RunningServer::shutdown`] with a grace period of at most `grace`.
    pub async fn shutdown_within(mut self, grace: Duration) -> bool {
        self.grace = self.grace.min(grace);
        self.shutdown().await
    }

    /// Stops accepting, lets in-flight requests finish for up to the grace period, then stops.
    /// Returns whether everything finished within the grace period.
    pub async fn shutdown(mut self) -> bool {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let finished = match tokio::time::timeout(self.grace, &mut self.task).await {
            Ok(_) => true,
            Err(_) => {
                self.task.abort();
                false
            }
        };
        for task in &self.background {
            task.abort();
        }
        finished
    }
}

/// A client connection, counted in `dn_sim_connections_open` while it lives (with TLS: from
/// its completed handshake), and bound to an event loop when a profile models them.
struct CountedConnection {
    stream: ServerStream,
    admission: Arc<Admission>,
    event_loop: Option<usize>,
}

impl CountedConnection {
    fn new(stream: ServerStream, admission: Arc<Admission>) -> Self {
        admission.metrics.connection_opened();
        let event_loop = admission.stages.event_loops.as_ref().map(|l| l.bind());
        Self {
            stream,
            admission,
            event_loop,
        }
    }
}

impl Drop for CountedConnection {
    fn drop(&mut self) {
        self.admission.metrics.connection_closed();
        if let (Some(loops), Some(i)) = (&self.admission.stages.event_loops, self.event_loop) {
            loops.unbind(i);
        }
    }
}

impl Connected for CountedConnection {
    type ConnectInfo = ConnectionInfo;
    fn connect_info(&self) -> ConnectionInfo {
        ConnectionInfo {
            tcp: self.stream.tcp().connect_info(),
            event_loop: self.event_loop,
        }
    }
}

impl AsyncRead for CountedConnection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for CountedConnection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// dn-sim on a runtime and thread of its own, so that a process embedding it (loadgen without
/// `--target`) does not share executor threads with it.
pub struct EmbeddedServer {
    local_addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    ratis_addr: Option<SocketAddr>,
    ratis_admin_addr: Option<SocketAddr>,
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
        let metrics_addr = server.metrics_addr();
        let ratis_addr = server.ratis_addr();
        let ratis_admin_addr = server.ratis_admin_addr();
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
            metrics_addr,
            ratis_addr,
            ratis_admin_addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Where `/prom`, `/metrics` and `/config` are served (`Config::metrics_listen`), if anywhere.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// Where the Ratis client port listens (`Config::ratis_listen`), if anywhere.
    pub fn ratis_addr(&self) -> Option<SocketAddr> {
        self.ratis_addr
    }

    /// Where the Ratis admin port listens (`Config::ratis_admin_listen`), if anywhere.
    pub fn ratis_admin_addr(&self) -> Option<SocketAddr> {
        self.ratis_admin_addr
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
pub async fn run_until_signal(config: Config, ready_file: Option<&Path>) -> anyhow::Result<()> {
    let handlers = config.handler_count;
    let server = start(config).await?;
    if let Some(path) = ready_file {
        write_ready_file(&server, path)
            .with_context(|| format!("cannot write --ready-file {}", path.display()))?;
    }
    tracing::info!(
        addr = %server.local_addr(),
        metrics = ?server.metrics_addr(),
        handlers,
        "dn-sim serving XceiverClientProtocolService"
    );
    wait_for_signal().await;
    tracing::info!("shutting down: no new connections, finishing in-flight requests");
    if !server.shutdown().await {
        tracing::warn!("grace period over; closing remaining streams");
    }
    Ok(())
}

/// `client ADDR` and, with an admin listener, `admin ADDR`, one a line, written whole (a reader
/// polling for the file never sees half of it): how a script learns the ports of `--listen
/// 127.0.0.1:0`.
fn write_ready_file(server: &RunningServer, path: &Path) -> std::io::Result<()> {
    let mut text = format!("client {}\n", server.local_addr());
    if let Some(admin) = server.metrics_addr() {
        text.push_str(&format!("admin {admin}\n"));
    }
    if let Some(ratis) = server.ratis_addr() {
        text.push_str(&format!("ratis {ratis}\n"));
    }
    if let Some(admin) = server.ratis_admin_addr() {
        text.push_str(&format!("ratis-admin {admin}\n"));
    }
    write_whole(path, &text)
}

/// Writes `text` to `path.tmp`, then renames it to `path`: a reader sees all of it or nothing.
pub(crate) fn write_whole(path: &Path, text: &str) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

pub(crate) async fn wait_for_signal() {
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
