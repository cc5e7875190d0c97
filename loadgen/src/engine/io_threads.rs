//! I/O threads, as h2load's `-t`: the connections are spread over I/O threads, each with a
//! single-threaded runtime that drives its connections and their workers. A connection's tasks
//! and its workers never wake each other across threads, and the connection's state is never
//! contended, which keeps loadgen's CPU per request low (it shares the machine with the target
//! in benchmarks). The coordinator runs on the caller's runtime.
//!
//! Start-up: each thread opens its connections and reports; only when all are up does the run
//! start (so an unreachable target fails at once and the clock starts with every connection
//! ready). At the end a thread returns when its workers have ended, or aborts them when told to.

use super::resilience::{Resilience, fresh_seed};
use super::{Shared, WorkerContext, per_request, persistent, ratis_units};
use crate::config::{RunConfig, Streams};
use crate::connection;
use crate::engine::recorder::{Flush, Recorder};
use crate::error::Error;
use crate::throttle::{ClientThrottle, ThrottleScope};
use crate::workload::Workload;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::mpsc as std_mpsc;
use tokio::sync::{mpsc, oneshot, watch};

/// The running I/O threads.
pub struct IoThreads {
    go: Vec<oneshot::Sender<Arc<Shared>>>,
    abort: watch::Sender<bool>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

/// How many I/O threads: `--runtime-threads`, else half the cores (one thread drives about
/// 100,000 requests/s; the other half is left to the target when it shares the machine, as the
/// embedded dn-sim does), never more than connections.
pub fn thread_count(config: &RunConfig) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    config
        .runtime_threads
        .unwrap_or(cores / 2)
        .clamp(1, config.clients.max(1))
}

impl IoThreads {
    /// Starts the threads and waits until every connection is open.
    pub fn start(
        config: &RunConfig,
        target: &connection::Endpoint,
        workload: Arc<dyn Workload>,
        flushes: mpsc::UnboundedSender<Flush>,
    ) -> Result<Self, Error> {
        let n = thread_count(config);
        let (ready_tx, ready_rx) = std_mpsc::channel::<Result<(), Error>>();
        let (abort, _) = watch::channel(false);
        let mut go = Vec::with_capacity(n);
        let mut handles = Vec::with_capacity(n);
        let process_throttle = (config.resilience.scope == ThrottleScope::Process)
            .then(|| config.resilience.build_throttle(fresh_seed()));
        for t in 0..n {
            let (go_tx, go_rx) = oneshot::channel::<Arc<Shared>>();
            go.push(go_tx);
            let plan = ThreadPlan {
                thread: t,
                threads: n,
                config: config.clone(),
                target: target.clone(),
                workload: Arc::clone(&workload),
                flushes: flushes.clone(),
                abort: abort.subscribe(),
                process_throttle: process_throttle.clone(),
            };
            let ready = ready_tx.clone();
            let handle = std::thread::Builder::new()
                .name(format!("loadgen-io-{t}"))
                .spawn(move || plan.run(ready, go_rx))
                .map_err(|e| Error::Run(format!("cannot start an I/O thread: {e}")))?;
            handles.push(handle);
        }
        drop(ready_tx);
        let mut threads = IoThreads { go, abort, handles };
        for _ in 0..n {
            match ready_rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    threads.go.clear(); // the threads see the run will not start, and end
                    threads.join();
                    return Err(e);
                }
                Err(_) => {
                    return Err(Error::Run("an I/O thread ended while connecting".into()));
                }
            }
        }
        Ok(threads)
    }

    /// Starts the workers.
    pub fn go(&mut self, shared: &Arc<Shared>) {
        for go in self.go.drain(..) {
            let _ = go.send(Arc::clone(shared));
        }
    }

    /// Aborts the workers still running; they hand over what they measured.
    pub fn abort(&self) {
        self.abort.send_replace(true);
    }

    pub fn join(&mut self) {
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

struct ThreadPlan {
    thread: usize,
    threads: usize,
    config: RunConfig,
    target: connection::Endpoint,
    workload: Arc<dyn Workload>,
    flushes: mpsc::UnboundedSender<Flush>,
    abort: watch::Receiver<bool>,
    /// `--throttle-scope process`: the one throttle every connection shares.
    process_throttle: Option<Arc<dyn ClientThrottle>>,
}

enum Conns {
    Unary(Vec<(usize, Rc<connection::unary::UnaryConnection>)>),
    Tonic(Vec<(usize, connection::Client)>),
    Ratis(Vec<(usize, connection::RatisClient)>, uuid::Uuid),
}

impl ThreadPlan {
    fn run(
        mut self,
        ready: std_mpsc::Sender<Result<(), Error>>,
        go: oneshot::Receiver<Arc<Shared>>,
    ) {
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                let _ = ready.send(Err(Error::Run(format!("cannot start a runtime: {e}"))));
                return;
            }
        };
        let local = tokio::task::LocalSet::new();
        local.block_on(&runtime, async move {
            let conns = match self.connect().await {
                Ok(c) => c,
                Err(e) => {
                    let _ = ready.send(Err(e));
                    return;
                }
            };
            let _ = ready.send(Ok(()));
            let Ok(shared) = go.await else {
                return;
            };
            // Workers of this thread share its statistics: they run on this thread only.
            let recorder = Rc::new(RefCell::new(Recorder::new(
                Arc::clone(&shared),
                self.flushes.clone(),
                if self.workload.single_rpc() {
                    self.workload.single_rpc_bytes().0
                } else {
                    0
                },
            )));
            let mut workers = tokio::task::JoinSet::new();
            let clients = self.config.clients;
            // One throttle per connection of this thread (or the process's).
            let res = &self.config.resilience;
            let throttles: Vec<Arc<dyn ClientThrottle>> = (0..clients)
                .map(|c| match &self.process_throttle {
                    Some(t) => Arc::clone(t),
                    None if c % self.threads == self.thread => res.build_throttle(fresh_seed()),
                    None => Arc::new(crate::throttle::NoThrottle) as Arc<dyn ClientThrottle>,
                })
                .collect();
            for idx in
                (0..self.config.threads).filter(|i| (i % clients) % self.threads == self.thread)
            {
                let ctx = WorkerContext {
                    idx,
                    shared: Arc::clone(&shared),
                    workload: Arc::clone(&self.workload),
                    recorder: Rc::clone(&recorder),
                    timeout: self.config.timeout,
                    fail_at_end: self.config.fail_at_end,
                    resilience: res
                        .active()
                        .then(|| Resilience::new(res, Arc::clone(&throttles[idx % clients]))),
                };
                let c = idx % clients;
                match (&conns, self.config.streams) {
                    (Conns::Unary(list), _) => {
                        let conn = list.iter().find(|(i, _)| *i == c).expect("own connection");
                        workers.spawn_local(per_request::worker(ctx, Rc::clone(&conn.1)));
                    }
                    (Conns::Tonic(list), Streams::Persistent { pipeline }) => {
                        let conn = list.iter().find(|(i, _)| *i == c).expect("own connection");
                        workers.spawn_local(persistent::worker(ctx, conn.1.clone(), pipeline));
                    }
                    (Conns::Ratis(list, group), Streams::Persistent { pipeline }) => {
                        let conn = list.iter().find(|(i, _)| *i == c).expect("own connection");
                        // One fixed command (echo) is pipelined; a write's units go RPC by
                        // RPC, and so does any RPC that may be retried.
                        if ctx.workload.pipelined_request().is_some() && ctx.resilience.is_none() {
                            workers.spawn_local(persistent::ratis_worker(
                                ctx,
                                conn.1.clone(),
                                pipeline,
                                *group,
                            ));
                        } else {
                            workers.spawn_local(ratis_units::worker(ctx, conn.1.clone(), *group));
                        }
                    }
                    (Conns::Tonic(_) | Conns::Ratis(..), Streams::PerRequest) => {
                        unreachable!("per-request streams use unary connections")
                    }
                }
            }
            drop(self.flushes);
            drop(recorder); // the workers hold it; the last one to end hands over the statistics
            loop {
                tokio::select! {
                    joined = workers.join_next() => match joined {
                        Some(Err(e)) if !e.is_cancelled() => tracing::error!("worker failed: {e}"),
                        Some(_) => {}
                        None => break,
                    },
                    _ = self.abort.wait_for(|a| *a) => {
                        workers.abort_all();
                        while workers.join_next().await.is_some() {}
                        break;
                    }
                }
            }
        });
    }

    /// Opens this thread's connections: connection c belongs to thread c mod threads. A
    /// connection that cannot be opened is [`Error::Unreachable`].
    async fn connect(&self) -> Result<Conns, Error> {
        let mine = (0..self.config.clients).filter(|c| c % self.threads == self.thread);
        match self.config.streams {
            Streams::PerRequest => {
                let mut list = Vec::new();
                for c in mine {
                    let conn = match &self.target {
                        connection::Endpoint::Uri(uris, tls) => connection::connect_unary(
                            &uris[c % uris.len()],
                            1,
                            self.config.connect_timeout,
                            self.config.timeout,
                            tls.as_ref(),
                        )
                        .await
                        .map_err(|e| Error::Unreachable(e.to_string()))?,
                        connection::Endpoint::Null(node) => {
                            vec![connection::unary::UnaryConnection::null(Arc::clone(node))]
                        }
                    };
                    list.extend(conn.into_iter().map(|conn| (c, conn)));
                }
                Ok(Conns::Unary(list))
            }
            Streams::Persistent { .. } => {
                let mut list = Vec::new();
                let connection::Endpoint::Uri(uris, tls) = &self.target else {
                    return Err(Error::Usage(format!(
                        "--stream-mode persistent needs a network target, not {}",
                        connection::null::NAME
                    )));
                };
                if let Some(group) = self.config.ratis {
                    let mut ratis = Vec::new();
                    for c in mine {
                        let conn = connection::connect_ratis(
                            &uris[c % uris.len()],
                            1,
                            self.config.connect_timeout,
                            tls.as_deref(),
                        )
                        .await
                        .map_err(|e| Error::Unreachable(e.to_string()))?;
                        ratis.extend(conn.into_iter().map(|conn| (c, conn)));
                    }
                    return Ok(Conns::Ratis(ratis, group));
                }
                for c in mine {
                    let uri = &uris[c % uris.len()];
                    let conn =
                        connection::connect(uri, 1, self.config.connect_timeout, tls.as_deref())
                            .await
                            .map_err(|e| Error::Unreachable(e.to_string()))?;
                    list.extend(conn.into_iter().map(|conn| (c, conn)));
                }
                Ok(Conns::Tonic(list))
            }
        }
    }
}
