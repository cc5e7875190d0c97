//! The resolved run configuration: only decided values, no raw flags. The engine and the reports
//! read this, never the command line.

use crate::cli::{CommonArgs, EchoArgs};
use std::time::Duration;

#[derive(Clone, Debug)]
pub enum Target {
    /// An embedded dn-sim started by loadgen on 127.0.0.1.
    Embedded { threads: usize },
    /// A DataNode or dn-sim at this address (HOST:PORT).
    Remote(String),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StopAfter {
    Requests(u64),
    Elapsed(Duration),
}

#[derive(Clone, Debug)]
pub struct EchoConfig {
    pub payload_req_bytes: usize,
    pub payload_resp_bytes: i32,
    pub sleep_time_ms: i32,
    pub read_only: bool,
}

#[derive(Clone, Debug)]
pub enum WorkloadConfig {
    Echo(EchoConfig),
}

impl WorkloadConfig {
    /// Freon's timer name for the workload.
    pub fn timer_name(&self) -> &'static str {
        match self {
            WorkloadConfig::Echo(_) => "rpc-payload",
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            WorkloadConfig::Echo(_) => "echo",
        }
    }
}

#[derive(Clone, Debug)]
pub struct RunConfig {
    pub target: Target,
    pub clients: usize,
    pub threads: usize,
    pub stop: StopAfter,
    pub fail_at_end: bool,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub datanode_uuid: String,
    pub container_id: i64,
    pub workload: WorkloadConfig,
}

impl RunConfig {
    fn from_common(c: &CommonArgs, workload: WorkloadConfig) -> Self {
        RunConfig {
            target: match &c.target {
                Some(t) => Target::Remote(t.clone()),
                None => Target::Embedded {
                    threads: c.embedded_threads as usize,
                },
            },
            clients: c.clients as usize,
            threads: c.threads as usize,
            stop: match c.duration {
                Some(d) => StopAfter::Elapsed(d),
                None => StopAfter::Requests(c.number_of_tests),
            },
            fail_at_end: c.fail_at_end,
            timeout: c.timeout,
            connect_timeout: c.connect_timeout,
            datanode_uuid: c.datanode_uuid.clone(),
            container_id: c.container_id,
            workload,
        }
    }

    pub fn echo(args: &EchoArgs) -> Self {
        let echo = EchoConfig {
            payload_req_bytes: (args.payload_req * 1024) as usize,
            // parse_payload_kb bounds the size to 32 MiB, so it fits an int32.
            payload_resp_bytes: (args.payload_resp * 1024) as i32,
            sleep_time_ms: args.sleep_time_ms,
            read_only: args.read_only,
        };
        Self::from_common(&args.common, WorkloadConfig::Echo(echo))
    }
}
