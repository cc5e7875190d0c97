//! What serves the DataNode to clients: [`server`] (XceiverServerGrpc: bind, serve, stop; the
//! embedded server), [`grpc_service`] (the `send` stream of port 9859), [`connection`] (what one
//! client may cost: the accept guard, limits on HTTP/2, the frame tap), [`tls`], [`reset`] (stream
//! resets for `--fault reset`), [`inflight_budget`] (`--max-inflight-bytes`), [`health`]
//! (`grpc.health.v1`) and [`admin`] (`/prom`, `/metrics`, `/config`).
//!
//! The Ratis client port (9858) will be a sibling of `grpc_service` here, feeding the same
//! [`crate::sim::admission::Admission`]; a client of SCM will be a room of its own beside `net`.

pub mod admin;
pub mod connection;
pub mod grpc_service;
pub mod health;
pub mod inflight_budget;
pub mod ratis_admin;
pub mod ratis_service;
pub mod reset;
pub mod server;
pub mod tls;
