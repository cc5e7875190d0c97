//! The settings dn-sim can change while serving and the parsers of their text forms, in one
//! place for both ways of setting them: the command line (`cli`, at start) and `PUT /config`
//! (`admin`, while serving). A value means the same in both and is checked by the same code.

use crate::sim::delay::DelayModel;
use crate::sim::fault::FaultPlan;
use crate::sim::service_limits::{LimitPolicy, LimitRates, Pushback, RejectTiming};
use serde_json::{Map, Value};

/// The largest handler pool (`--handler-count`, `handler_count`).
pub const MAX_HANDLERS: u32 = 100_000;

/// Settings that can change while serving (`PUT /config`). A request reads them once, when it
/// arrives, so requests already running finish under the settings they started with.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct LiveSettings {
    pub delays: DelayModel,
    pub faults: FaultPlan,
}

/// The status a service limit's rejection carries: UNAVAILABLE or RESOURCE_EXHAUSTED.
pub fn parse_limit_status(s: &str) -> Result<tonic::Code, String> {
    match crate::sim::fault::parse_grpc_code(s) {
        Some(c @ (tonic::Code::Unavailable | tonic::Code::ResourceExhausted)) => Ok(c),
        _ => Err(format!("'{s}' is not UNAVAILABLE or RESOURCE_EXHAUSTED")),
    }
}

/// A positive rate: bytes per second (`100MB/s`) or a plain number per second.
pub fn parse_bandwidth(s: &str) -> Result<f64, String> {
    match common::units::parse_rate(s) {
        Ok(r) if r > 0.0 => Ok(r),
        Ok(_) => Err("must be greater than zero".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// The settings a `PUT /config` body asks for, all validated; `None` = unchanged.
#[derive(Debug, Default)]
pub struct Change {
    pub handler_count: Option<usize>,
    /// `Some(None)`: unbounded.
    pub max_queue: Option<Option<usize>>,
    pub live: Option<LiveSettings>,
    pub limits: Option<(LimitRates, LimitPolicy)>,
}

/// The keys `PUT /config` accepts.
pub const SETTABLE: &str = "handler_count, max_queue, delays, faults, limit_ingress, \
                            limit_egress, limit_ops, limit_status, limit_pushback, \
                            limit_reject_timing, limit_burst";

impl Change {
    /// Reads a partial JSON object of settings against the current ones. Any bad value is an
    /// error naming its key, and then nothing is to change.
    pub fn from_json(
        changes: &Map<String, Value>,
        live_now: &LiveSettings,
        rates_now: LimitRates,
        policy_now: LimitPolicy,
    ) -> Result<Change, String> {
        let mut change = Change::default();
        let mut live = live_now.clone();
        let (mut live_changed, mut limits_changed) = (false, false);
        let (mut rates, mut policy) = (rates_now, policy_now);
        for (key, value) in changes {
            if key.starts_with("limit_") {
                limit_setting(key, value, &mut rates, &mut policy)?;
                limits_changed = true;
                continue;
            }
            match key.as_str() {
                "handler_count" => match value.as_u64() {
                    Some(n) if (1..=u64::from(MAX_HANDLERS)).contains(&n) => {
                        change.handler_count = Some(n as usize)
                    }
                    _ => {
                        return Err(format!(
                            "handler_count must be a whole number from 1 to {MAX_HANDLERS}, not {value}"
                        ));
                    }
                },
                "max_queue" => match value {
                    Value::Null => change.max_queue = Some(None),
                    v => match v.as_u64() {
                        Some(n) => change.max_queue = Some(Some(n as usize)),
                        None => {
                            return Err(format!(
                                "max_queue must be a whole number or null (unbounded), not {value}"
                            ));
                        }
                    },
                },
                "delays" => {
                    live.delays = serde_json::from_value::<DelayModel>(value.clone())
                        .map_err(|e| format!("delays: {e}"))?;
                    live_changed = true;
                }
                "faults" => {
                    live.faults = serde_json::from_value::<FaultPlan>(value.clone())
                        .map_err(|e| format!("faults: {e}"))?;
                    live_changed = true;
                }
                other => {
                    return Err(format!(
                        "unknown or read-only setting '{other}' (settable: {SETTABLE})"
                    ));
                }
            }
        }
        change.live = live_changed.then_some(live);
        change.limits = limits_changed.then_some((rates, policy));
        Ok(change)
    }
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
            Value::String(t) => parse_bandwidth(t)
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
        "limit_status" => policy.status = parse_limit_status(text()?)?,
        "limit_pushback" => policy.pushback = text()?.parse::<Pushback>()?,
        "limit_reject_timing" => policy.timing = text()?.parse::<RejectTiming>()?,
        "limit_burst" => {
            policy.burst =
                common::units::parse_duration(text()?).map_err(|e| format!("{key}: {e}"))?
        }
        other => return Err(format!("unknown setting '{other}' (settable: {SETTABLE})")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn change(body: Value) -> Result<Change, String> {
        let Value::Object(map) = body else {
            panic!("an object")
        };
        Change::from_json(
            &map,
            &LiveSettings::default(),
            LimitRates::default(),
            LimitPolicy::default(),
        )
    }

    #[test]
    fn a_change_carries_only_what_the_body_names() {
        let c = change(json!({"handler_count": 8, "limit_ops": "500/s"})).unwrap();
        assert_eq!(c.handler_count, Some(8));
        assert!(c.max_queue.is_none() && c.live.is_none());
        let (rates, _) = c.limits.unwrap();
        assert_eq!(rates.ops, Some(500.0));
        let c = change(json!({"max_queue": null, "delays": {"all": "1ms"}})).unwrap();
        assert_eq!(c.max_queue, Some(None));
        assert!(c.live.is_some() && c.handler_count.is_none() && c.limits.is_none());
    }

    #[test]
    fn bad_values_name_their_key_and_change_nothing() {
        for (body, needle) in [
            (json!({"handler_count": 0}), "handler_count"),
            (
                json!({"handler_count": u64::from(MAX_HANDLERS) + 1}),
                "100000",
            ),
            (json!({"max_queue": "x"}), "max_queue"),
            (json!({"limit_status": "INTERNAL"}), "UNAVAILABLE"),
            (json!({"limit_ingress": -1}), "limit_ingress"),
            (json!({"listen": "x"}), "read-only setting 'listen'"),
            (json!({"handler_count": 4, "faults": 7}), "faults"),
        ] {
            let e = change(body.clone()).unwrap_err();
            assert!(e.contains(needle), "{body}: {e}");
        }
    }

    #[test]
    fn rates_parse_the_same_as_the_flags() {
        assert_eq!(parse_bandwidth("1KB/s"), Ok(1024.0));
        assert!(parse_bandwidth("0").is_err());
        assert_eq!(
            parse_limit_status("resource_exhausted"),
            Ok(tonic::Code::ResourceExhausted)
        );
    }
}
