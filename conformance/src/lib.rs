//! A differential conformance runner: the same request sequences against a real Apache Ozone
//! DataNode and dn-sim, answers compared field by field after normalisation.
//!
//! Flow: `scenario` (files → validated scenarios) → `runner` (container IDs, config groups,
//! `target` start/stop, `client` gRPC, `ratis` Raft requests on the Ratis port and `prom` scrapes
//! per step, `normalize`; `outcome` holds the answers and verdicts) →
//! `report` (markdown table, differences, totals). `proto` and `placeholders` turn scenario JSON
//! into request bytes; `proto` also turns response bytes into JSON.

pub mod cli;
pub mod client;
pub mod normalize;
pub mod outcome;
pub mod placeholders;
pub mod prom;
pub mod proto;
pub mod ratis;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod target;
