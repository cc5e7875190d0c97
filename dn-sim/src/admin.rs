//! The HTTP listener beside the gRPC port (the DataNode's 9882): metrics for Prometheus on `/prom`
//! (the DataNode's path, with DataNode names) and `/metrics` (Prometheus naming only), and the
//! live configuration on `/config`: `GET` returns it as JSON, `PUT` with a partial JSON object
//! changes `handler_count`, `max_queue`, `delays` and `faults` without a restart. Experiment
//! scripts use it to sweep a parameter. It binds to 127.0.0.1 unless told otherwise.

use crate::delay::DelayModel;
use crate::dispatcher::{Dispatcher, LiveSettings};
use crate::fault::FaultPlan;
use crate::service_limits::{LimitPolicy, LimitRates, Pushback, RejectTiming};
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
    dispatcher: Arc<Dispatcher>,
    info: Arc<StaticInfo>,
}

pub fn router(dispatcher: Arc<Dispatcher>, info: StaticInfo) -> Router {
    Router::new()
        .route("/prom", get(prom))
        .route("/metrics", get(metrics))
        .route("/config", get(get_config).put(put_config))
        .with_state(AppState {
            dispatcher,
            info: Arc::new(info),
        })
}

const EXPOSITION: &str = "text/plain; version=0.0.4; charset=utf-8";

async fn prom(State(s): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, EXPOSITION)],
        s.dispatcher.metrics.render_prom(&s.dispatcher.pool),
    )
        .into_response()
}

async fn metrics(State(s): State<AppState>) -> Response {
    (
        [(header::CONTENT_TYPE, EXPOSITION)],
        s.dispatcher.metrics.render_metrics(&s.dispatcher.pool),
    )
        .into_response()
}

fn config_json(s: &AppState) -> Value {
    let live = s.dispatcher.live.load();
    let (rates, policy) = (s.dispatcher.limits.rates(), s.dispatcher.limits.policy());
    json!({
        "listen": s.info.listen,
        "containers": s.info.containers,
        "seed": s.info.seed,
        "handler_count": s.dispatcher.pool.size(),
        "max_queue": s.dispatcher.pool.max_queue(),
        "delays": live.delays,
        "faults": live.faults,
        "limit_ingress": rates.ingress,
        "limit_egress": rates.egress,
        "limit_ops": rates.ops,
        "limit_status": crate::fault::grpc_code_name(policy.status),
        "limit_pushback": policy.pushback.to_string(),
        "limit_reject_timing": policy.timing.to_string(),
        "limit_burst": crate::delay::format_duration(policy.burst),
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
    let mut handler_count = None;
    let mut max_queue = None;
    let mut live = LiveSettings::clone(&s.dispatcher.live.load());
    let mut live_changed = false;
    let mut rates = s.dispatcher.limits.rates();
    let mut policy = s.dispatcher.limits.policy();
    let mut limits_changed = false;
    for (key, value) in &changes {
        if key.starts_with("limit_") {
            if let Err(e) = limit_setting(key, value, &mut rates, &mut policy) {
                return bad(e);
            }
            limits_changed = true;
            continue;
        }
        match key.as_str() {
            "handler_count" => match value.as_u64() {
                Some(n) if (1..=100_000).contains(&n) => handler_count = Some(n as usize),
                _ => {
                    return bad(format!(
                        "handler_count must be a whole number from 1 to 100000, not {value}"
                    ));
                }
            },
            "max_queue" => match value {
                Value::Null => max_queue = Some(None),
                v => match v.as_u64() {
                    Some(n) => max_queue = Some(Some(n as usize)),
                    None => {
                        return bad(format!(
                            "max_queue must be a whole number or null (unbounded), not {value}"
                        ));
                    }
                },
            },
            "delays" => match serde_json::from_value::<DelayModel>(value.clone()) {
                Ok(d) => {
                    live.delays = d;
                    live_changed = true;
                }
                Err(e) => return bad(format!("delays: {e}")),
            },
            "faults" => match serde_json::from_value::<FaultPlan>(value.clone()) {
                Ok(f) => {
                    live.faults = f;
                    live_changed = true;
                }
                Err(e) => return bad(format!("faults: {e}")),
            },
            other => {
                return bad(format!(
                    "unknown or read-only setting '{other}' (settable: handler_count, max_queue, \
                     delays, faults, limit_ingress, limit_egress, limit_ops, limit_status, \
                     limit_pushback, limit_reject_timing, limit_burst)"
                ));
            }
        }
    }
    if limits_changed && let Err(e) = s.dispatcher.limits.update(rates, policy) {
        return bad(e);
    }
    if let Some(n) = handler_count {
        s.dispatcher.pool.resize(n).await;
    }
    if let Some(bound) = max_queue {
        s.dispatcher.pool.set_max_queue(bound);
    }
    if live_changed {
        s.dispatcher.live.store(Arc::new(live));
    }
    tracing::info!(changes = %body, "configuration changed");
    axum::Json(config_json(&s)).into_response()
}

/// Applies one `limit_*` setting: rates as a number (per second), a rate string (`100MB/s`) or
/// null (unlimited); the policy fields as their flag's text.
fn limit_setting(
    key: &str,
    value: &Value,
    rates: &mut LimitRates,
    policy: &mut LimitPolicy,
) -> Result<(), String> {
    let rate = || -> Result<Option<f64>, String> {
        match value {
            Value::Null => Ok(None),
            Value::Number(n) => match n.as_f64() {
                Some(r) if r > 0.0 => Ok(Some(r)),
                _ => Err(format!("{key} must be greater than zero or null")),
            },
            Value::String(t) => crate::cli::parse_bandwidth(t)
                .map(Some)
                .map_err(|e| format!("{key}: {e}")),
            _ => Err(format!(
                "{key} must be a number, a rate like \"100MB/s\", or null"
            )),
        }
    };
    let text = || {
        value
            .as_str()
            .ok_or_else(|| format!("{key} must be a string"))
    };
    match key {
        "limit_ingress" => rates.ingress = rate()?,
        "limit_egress" => rates.egress = rate()?,
        "limit_ops" => rates.ops = rate()?,
        "limit_status" => policy.status = crate::cli::parse_limit_status(text()?)?,
        "limit_pushback" => policy.pushback = text()?.parse::<Pushback>()?,
        "limit_reject_timing" => policy.timing = text()?.parse::<RejectTiming>()?,
        "limit_burst" => {
            policy.burst =
                common::units::parse_duration(text()?).map_err(|e| format!("{key}: {e}"))?
        }
        other => return Err(format!("unknown setting '{other}'")),
    }
    Ok(())
}
