//! The DataNodes loadgen can run inside its own process: an embedded dn-sim (`echo` without
//! `--target`, a sweep without one) and the null DataNode (`--target null`: dn-sim's dispatcher
//! called without a network). Both need the `embedded-dn-sim` feature (on by default); a loadgen
//! built with `--no-default-features` links no server, and asking it for either is a usage error
//! naming what to do instead.

use crate::config::{RunConfig, WorkloadConfig};
use crate::connection::null::NullDataNode;
use crate::error::Error;
use std::sync::Arc;

/// What a loadgen built without the embedded dn-sim answers when asked for one.
pub const NOT_BUILT_IN: &str = "this loadgen was built without the embedded dn-sim \
     (cargo --no-default-features): give --target HOST:PORT";

#[cfg(feature = "embedded-dn-sim")]
pub use with_dn_sim::*;

#[cfg(not(feature = "embedded-dn-sim"))]
pub use without_dn_sim::*;

/// The store an embedded or null DataNode needs: none of its own for echo, discard for a write
/// that reads nothing back, memory (as much as the run writes) when data is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreNeed {
    None,
    Discard,
    Memory,
}

impl StoreNeed {
    pub fn of(config: &RunConfig) -> Self {
        match &config.workload {
            WorkloadConfig::Echo(_) => StoreNeed::None,
            WorkloadConfig::Write(w) if !w.then_read => StoreNeed::Discard,
            _ => StoreNeed::Memory,
        }
    }
}

#[cfg(feature = "embedded-dn-sim")]
mod with_dn_sim {
    use super::*;
    use dn_sim::datanode::container_ids::ContainerIds;
    use dn_sim::datanode::store::StoreKind;

    /// An embedded dn-sim; it stops when dropped.
    pub type Server = dn_sim::EmbeddedServer;

    /// The null DataNode of `--target null` and the header's description of it.
    pub fn start_null(config: &RunConfig) -> Result<(Arc<NullDataNode>, String), Error> {
        let (store, containers) = match StoreNeed::of(config) {
            StoreNeed::None => (StoreKind::Memory, dn_sim::Config::default().containers),
            StoreNeed::Discard => (
                StoreKind::Discard,
                ContainerIds::single(config.container_id),
            ),
            StoreNeed::Memory => (StoreKind::Memory, ContainerIds::single(config.container_id)),
        };
        let kind = if store == StoreKind::Discard {
            "discard"
        } else {
            "memory"
        };
        let node = NullDataNode::new(store, &containers)
            // Not the user's input: loadgen chose the store and the containers.
            .map_err(|e| Error::Run(format!("--target null: {e}")))?;
        let desc = format!(
            "{} (dn-sim's dispatcher called in loadgen's process, store {kind})",
            crate::connection::null::NAME
        );
        Ok((node, desc))
    }

    /// The embedded dn-sim of a run without `--target`, on `threads` runtime threads, and the
    /// header's description of it.
    pub fn start(config: &RunConfig, threads: usize) -> Result<(Server, String), Error> {
        let mut sim = dn_sim::Config::loopback();
        let kind = match StoreNeed::of(config) {
            StoreNeed::None => "",
            need => {
                sim.containers = ContainerIds::single(config.container_id);
                sim.capacity = u64::MAX / 2;
                if need == StoreNeed::Discard {
                    sim.store = StoreKind::Discard;
                    ", store discard"
                } else {
                    sim.store = StoreKind::Memory;
                    ", store memory"
                }
            }
        };
        // --ratis: its Ratis port, hosting the pipeline the run names.
        if let Some(group) = config.ratis {
            sim.ratis_listen = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
            sim.pipelines = vec![group];
        }
        let server = Server::start(sim, threads)
            .map_err(|e| Error::Run(format!("cannot start the embedded dn-sim: {e:#}")))?;
        let (addr, port) = match server.ratis_addr() {
            Some(ratis) => (ratis, ", its Ratis port"),
            None => (server.local_addr(), ""),
        };
        let desc = format!(
            "{addr} (embedded dn-sim started by loadgen{kind}{port}, {threads} runtime thread(s))"
        );
        Ok((server, desc))
    }

    /// An embedded dn-sim with `profile` (the text of a `dn-sim-profile/1` file, its release
    /// the one dn-sim answers as), serving echoes for `container_id`: `loadgen calibrate`'s check.
    pub fn start_profiled(
        profile: &str,
        container_id: i64,
        handler_count: u32,
        threads: usize,
    ) -> Result<Server, Error> {
        let profile = dn_sim::sim::profile::Profile::parse(profile)
            .map_err(|e| Error::Run(format!("calibrate: the fitted profile does not load: {e}")))?;
        let config = dn_sim::Config {
            containers: ContainerIds::single(container_id),
            ozone_version: profile.release,
            profile: Some(profile),
            handler_count: handler_count as usize,
            ..dn_sim::Config::loopback()
        };
        Server::start(config, threads).map_err(|e| {
            Error::Run(format!(
                "calibrate: cannot start the embedded dn-sim: {e:#}"
            ))
        })
    }

    /// The embedded dn-sim of a sweep: its admin listener on a port of its own (the sweep
    /// changes dn-sim's settings through it); a write that is not read back is discarded; with
    /// `ratis_group`, its Ratis port hosting that pipeline.
    pub fn start_for_sweep(
        write_container: Option<(i64, bool)>,
        ratis_group: Option<uuid::Uuid>,
        threads: usize,
    ) -> Result<Server, Error> {
        let mut config = dn_sim::Config {
            metrics_listen: Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
            ..dn_sim::Config::loopback()
        };
        if let Some((container_id, then_read)) = write_container {
            config.containers = ContainerIds::single(container_id);
            config.capacity = u64::MAX / 2;
            if !then_read {
                config.store = StoreKind::Discard;
            }
        }
        if let Some(group) = ratis_group {
            config.ratis_listen = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
            config.pipelines = vec![group];
        }
        Server::start(config, threads)
            .map_err(|e| Error::Run(format!("sweep: cannot start the embedded dn-sim: {e:#}")))
    }
}

#[cfg(not(feature = "embedded-dn-sim"))]
mod without_dn_sim {
    use super::*;

    /// No embedded dn-sim can exist in this build.
    pub enum Server {}

    impl Server {
        pub fn local_addr(&self) -> std::net::SocketAddr {
            match *self {}
        }

        pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
            match *self {}
        }

        pub fn ratis_addr(&self) -> Option<std::net::SocketAddr> {
            match *self {}
        }
    }

    pub fn start_null(_: &RunConfig) -> Result<(Arc<NullDataNode>, String), Error> {
        Err(Error::Usage(format!("--target null: {NOT_BUILT_IN}")))
    }

    pub fn start(_: &RunConfig, _: usize) -> Result<(Server, String), Error> {
        Err(Error::Usage(NOT_BUILT_IN.to_string()))
    }

    pub fn start_profiled(_: &str, _: i64, _: u32, _: usize) -> Result<Server, Error> {
        Err(Error::Usage(format!(
            "calibrate's check (--check-on COMMAND runs it on a dn-sim process, --check-rounds 0 skips it): {NOT_BUILT_IN}"
        )))
    }

    pub fn start_for_sweep(
        _: Option<(i64, bool)>,
        _: Option<uuid::Uuid>,
        _: usize,
    ) -> Result<Server, Error> {
        Err(Error::Usage(format!(
            "sweep without --target: {NOT_BUILT_IN}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_without_the_feature_says_what_to_do() {
        assert!(NOT_BUILT_IN.contains("--no-default-features"));
        assert!(NOT_BUILT_IN.contains("--target HOST:PORT"));
        assert!(!NOT_BUILT_IN.contains('\n'));
    }
}
