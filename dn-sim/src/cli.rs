//! Command-line flags of the `dn-sim` binary, turned into a [`Config`].

use crate::containers::ContainerIds;
use crate::server::Config;
use crate::store::StoreKind;
use clap::Parser;
use std::net::SocketAddr;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "dn-sim",
    version,
    about = "A simulated Apache Ozone DataNode (XceiverClientProtocolService on port 9859)"
)]
pub struct Args {
    /// Address of the client port (the DataNode's hdds.container.ipc.port).
    #[arg(long, default_value = "0.0.0.0:9859")]
    pub listen: SocketAddr,

    /// Pre-created containers: a list and/or ranges, e.g. 1 or 1-100,200.
    #[arg(long, default_value = "1")]
    pub containers: ContainerIds,

    /// Where block data goes: memory, discard (keep lengths and metadata, drop the bytes) or
    /// dir:PATH (block files in the DataNode's layout, PATH/CONTAINER_ID/chunks/LOCAL_ID.block).
    #[arg(long, default_value = "memory")]
    pub store: StoreKind,

    /// Block data the store may hold (memory or disk) before writes get DISK_OUT_OF_SPACE,
    /// e.g. 1GB, 512MB (powers of 1024).
    #[arg(long, default_value = "1GB", value_parser = parse_size)]
    pub capacity: u64,

    /// Verify the checksums of written chunks, as a DataNode with
    /// hdds.datanode.chunk.data.validation.check=true: a mismatch answers IO_EXCEPTION.
    #[arg(long)]
    pub verify_checksums: bool,

    /// How long shutdown waits for in-flight requests (e.g. 10s).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,

    /// Runtime worker threads (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
}

fn parse_size(s: &str) -> Result<u64, String> {
    common::units::parse_size(s).map_err(|e| e.to_string())
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    common::units::parse_duration(s).map_err(|e| e.to_string())
}

impl Args {
    pub fn config(&self) -> Config {
        Config {
            listen: self.listen,
            containers: self.containers.clone(),
            store: self.store.clone(),
            capacity: self.capacity,
            verify_checksums: self.verify_checksums,
            shutdown_grace: self.shutdown_grace,
        }
    }
}
