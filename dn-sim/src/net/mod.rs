//! What serves the DataNode to clients: [`server`] (XceiverServerGrpc: bind, serve, stop; the
//! embedded server), [`grpc_service`] (the `send` stream of port 9859), [`connection`] (what one
//! client may cost: the accept guard, limits on HTTP/2, the frame tap), [`tls`], [`reset`] (stream
//! resets for `--fault reset`), [`inflight_budget`] (`--max-inflight-bytes`), [`health`]
//! (`grpc.health.v1`) and [`admin`] (`/prom`, `/metrics`, `/config`).
//!
//! [`ratis_service`] (9858) and [`ratis_admin`] (9857) are the Ratis ports, serving the Raft groups
//! of [`raft_groups`] (given at start, or created and closed by SCM); [`scm`] is the client of SCM
//! (`--scm`): registration, heartbeats and SCM's commands over Hadoop RPC. [`fleet`] serves many
//! DataNode identities in one process (`--datanodes N`) with one admin listener.

pub mod admin;
pub mod connection;
pub mod fleet;
pub mod grpc_service;
pub mod health;
pub mod inflight_budget;
pub mod raft_groups;
pub mod ratis_admin;
pub mod ratis_service;
pub mod reset;
pub mod scm;
pub mod server;
pub mod tls;
