//! dn-sim: a simulated Apache Ozone DataNode.
//!
//! Models that the request path consults (pure: no sockets, no tasks):
//! - [`delay`]: per-request service delays by command type (`--delay`);
//! - [`disk`]: one shared storage device for chunk data (`--disk-bandwidth`, `--disk-latency`);
//! - [`fault`]: injected failures by command type (`--fault`);
//! - [`rng`]: seeded per-stream random number generators (`--seed`);
//! - [`target`]: the `TYPE=` part shared by `--delay` and `--fault`.

pub mod delay;
pub mod disk;
pub mod fault;
pub mod rng;
pub mod target;
