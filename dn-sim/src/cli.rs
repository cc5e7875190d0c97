//! Command-line flags of the `dn-sim` binary, turned into a [`Config`].

use crate::containers::ContainerIds;
use crate::server::Config;
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

    /// How long shutdown waits for in-flight requests (e.g. 10s).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,

    /// Runtime worker threads (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    common::units::parse_duration(s).map_err(|e| e.to_string())
}

impl Args {
    pub fn config(&self) -> Config {
        Config {
            listen: self.listen,
            containers: self.containers.clone(),
            shutdown_grace: self.shutdown_grace,
        }
    }
}
