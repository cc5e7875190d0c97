//! The simulation around the DataNode: what a real DataNode's environment would add to a request's
//! time and fate. [`admission`] runs every request through it (service limits, the handler
//! [`pool`], injected [`delay`]s and [`fault`]s, the shared [`disk`]) before and after handing it
//! to [`crate::datanode`]. [`live_settings`] holds what may change while serving (`PUT /config`);
//! [`cmd_selector`] is the `TYPE=` part of `--delay` and `--fault`; [`rng`] the seeded per-stream
//! generators; [`metrics`] the simulator's own series (`dn_sim_*`) beside the DataNode's;
//! [`stages`] the DataNode's event loops and handler costs as a [`profile`] gives them, [`cpu`]
//! the CPU it spends, both on [`virtual_time`] queues.
//!
//! Nothing here uses [`crate::net`]: the simulation is the same behind every front end.

pub mod admission;
pub mod cmd_selector;
pub mod cpu;
pub mod delay;
pub mod disk;
pub mod fault;
pub mod live_settings;
pub mod metrics;
pub mod monitor;
pub mod pool;
pub mod profile;
pub mod raft;
pub mod rng;
pub mod service_limits;
pub mod stages;
pub mod virtual_time;
