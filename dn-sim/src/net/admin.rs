//! The HTTP listener beside the gRPC port (the DataNode's 9882): metrics for Prometheus on `/prom`
//! (the DataNode's path, with DataNode names) and `/metrics` (Prometheus naming only), and the
//! live configuration on `/config`: `GET` returns it as JSON, `PUT` with a partial JSON object
//! changes `handler_count`, `max_queue`, `delays` and `faults` without a restart. Experiment
//! scripts use it to sweep a parameter. It binds to 127.0.0.1 unless told otherwise.

use crate::sim::admission::Admission;
use crate::sim::live_settings::Change;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// What `/config` shows besides the live settings.
#[derive(Clone, Debug)]
pub struct StaticInfo {
    pub listen: String,
    pub containers: String,
    pub seed: u64,
}

#[derive(Clone)]
struct AppState {
    admission: Arc<Admission>,
    info: Arc<StaticInfo>,
}

pub fn router(admission: Arc<Admission>, info: StaticInfo) -> Router {
    Router::new()
        .route("/prom", get(prom))
        .route("/metrics", get(metrics))
        .route("/config", get(get_config).put(put_config))
        .with_state(AppState {
            admission,
            info: Arc::new(info),
        })
}

const EXPOSITION: &str = "text/plain; version=0.0.4; charset=utf-8";

async fn prom(State(s): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, EXPOSITION)],
        s.admission.metrics.render_prom(&s.admission.pool),
    )
        .into_response()
}

async fn metrics(State(s): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, EXPOSITION)],
        s.admission.metrics.render_metrics(&s.admission.pool),
    )
        .into_response()
}

fn config_json(s: &AppState) -> Value {
    let live = s.admission.live.load();
    let (rates, policy) = (s.admission.limits.rates(), s.admission.limits.policy());
    json!({
        "listen": s.info.listen,
        "containers": s.info.containers,
        "seed": s.info.seed,
        "handler_count": s.admission.pool.size(),
        "max_queue": s.admission.pool.max_queue(),
        "delays": live.delays,
        "faults": live.faults,
        "limit_ingress": rates.ingress,
        "limit_egress": rates.egress,
        "limit_ops": rates.ops,
        "limit_status": crate::sim::fault::grpc_code_name(policy.status),
        "limit_pushback": policy.pushback.to_string(),
        "limit_reject_timing": policy.timing.to_string(),
        "limit_burst": crate::sim::delay::format_duration(policy.burst),
    })
}

async fn get_config(State(s): State<AppState>) -> Response {
    axum::Json(config_json(&s)).into_response()
}

fn bad(message: String) -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({ "error": message })),
    )
        .into_response()
}

async fn put_config(State(s): State<AppState>, body: String) -> Response {
    let changes: Map<String, Value> = match serde_json::from_str(&body) {
        Ok(Value::Object(map)) => map,
        Ok(_) => return bad("the body must be a JSON object".into()),
        Err(e) => return bad(format!("invalid JSON: {e}")),
    };
    // Validate everything before changing anything, so a bad request changes nothing.
    let change = match Change::from_json(
        &changes,
        &s.admission.live.load(),
        s.admission.limits.rates(),
        s.admission.limits.policy(),
    ) {
        Ok(change) => change,
        Err(e) => return bad(e),
    };
    if let Some((rates, policy)) = change.limits
        && let Err(e) = s.admission.limits.update(rates, policy)
    {
        return bad(e);
    }
    if let Some(n) = change.handler_count {
        s.admission.pool.resize(n).await;
        // The event loops follow the pool as in a DataNode restarted with it (`sim::stages`).
        if let Some(loops) = &s.admission.stages.event_loops {
            loops.resize_for_pool(n, s.admission.metrics.recorder());
        }
    }
    if let Some(bound) = change.max_queue {
        s.admission.pool.set_max_queue(bound);
    }
    if let Some(live) = change.live {
        s.admission.live.store(Arc::new(live));
    }
    tracing::info!(changes = %body, "configuration changed");
    axum::Json(config_json(&s)).into_response()
}
