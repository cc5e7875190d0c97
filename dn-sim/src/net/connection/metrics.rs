//! What connections did, as Prometheus counters: [`ConnectionMetrics`], [`CloseReason`] and the
//! label tables (frame types and error codes, built from `common::http2`'s names).

use common::http2::{ERROR_CODE_NAMES, FRAME_TYPE_NAMES};
use metrics::{Counter, Key, KeyName, Label, Recorder, SharedString};
use metrics_exporter_prometheus::PrometheusRecorder;

/// HTTP/2 error codes (RFC 9113 §7) as metric labels; index = code, the last (`UNKNOWN`) for any
/// other.
const ERROR_CODES: [&str; ERROR_CODE_NAMES.len() + 1] = {
    let names = ERROR_CODE_NAMES;
    let mut labels = ["UNKNOWN"; ERROR_CODE_NAMES.len() + 1];
    let mut i = 0;
    while i < names.len() {
        labels[i] = names[i];
        i += 1;
    }
    labels
};

/// Frame types (RFC 9113 §6) as metric labels; index = type, the last (`UNKNOWN`) for any other.
pub(super) const FRAME_TYPES: [&str; FRAME_TYPE_NAMES.len() + 1] = {
    let names = FRAME_TYPE_NAMES;
    let mut labels = ["UNKNOWN"; FRAME_TYPE_NAMES.len() + 1];
    let mut i = 0;
    while i < names.len() {
        labels[i] = names[i];
        i += 1;
    }
    labels
};

/// Why a connection ended, as the label of `dn_sim_connections_closed_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// The client closed it, or a graceful GOAWAY (NO_ERROR) ended it.
    Normal,
    /// A read or write failed (typically the client reset the TCP connection).
    IoError,
    /// The server sent GOAWAY with an error code (a protocol error, a limit h2 enforces).
    GoawayError,
    /// The first bytes were not the HTTP/2 client preface.
    BadPreface,
    /// No preface and SETTINGS within `--handshake-timeout`.
    HandshakeTimeout,
    /// More PING strikes than `--max-ping-strikes`.
    TooManyPings,
}

const CLOSE_REASONS: [(CloseReason, &str); 6] = [
    (CloseReason::Normal, "normal"),
    (CloseReason::IoError, "io_error"),
    (CloseReason::GoawayError, "goaway_error"),
    (CloseReason::BadPreface, "bad_preface"),
    (CloseReason::HandshakeTimeout, "handshake_timeout"),
    (CloseReason::TooManyPings, "too_many_pings"),
];

/// Counters of what connections did, registered once on the server's recorder; recording is an
/// atomic add on a handle picked by index.
#[derive(Clone)]
pub struct ConnectionMetrics {
    pub(super) accepted: Counter,
    pub(super) refused: Counter,
    pub(super) closed: [Counter; CLOSE_REASONS.len()],
    pub(super) frames_received: [Counter; FRAME_TYPES.len()],
    pub(super) goaways_sent: [Counter; ERROR_CODES.len()],
    pub(super) resets_sent: [Counter; ERROR_CODES.len()],
}

impl ConnectionMetrics {
    pub fn register(recorder: &PrometheusRecorder) -> Self {
        let meta = metrics::Metadata::new(module_path!(), metrics::Level::INFO, None);
        let counter = |name: &'static str, label: Option<(&'static str, &'static str)>| {
            let labels: Vec<Label> = label.map(|(k, v)| Label::new(k, v)).into_iter().collect();
            recorder.register_counter(&Key::from_parts(name, labels), &meta)
        };
        let help = [
            (
                "dn_sim_connections_accepted_total",
                "Client connections accepted",
            ),
            (
                "dn_sim_connections_refused_total",
                "Client connections closed on arrival: --max-connections were open",
            ),
            (
                "dn_sim_connections_closed_total",
                "Client connections ended, by reason",
            ),
            (
                "dn_sim_http2_frames_received_total",
                "HTTP/2 frames received from clients, by type",
            ),
            (
                "dn_sim_http2_goaways_sent_total",
                "HTTP/2 GOAWAY frames sent, by error code",
            ),
            (
                "dn_sim_http2_resets_sent_total",
                "HTTP/2 RST_STREAM frames sent, by error code",
            ),
        ];
        for (name, text) in help {
            recorder.describe_counter(
                KeyName::from_const_str(name),
                None,
                SharedString::const_str(text),
            );
        }
        Self {
            accepted: counter("dn_sim_connections_accepted_total", None),
            refused: counter("dn_sim_connections_refused_total", None),
            closed: CLOSE_REASONS.map(|(_, reason)| {
                counter("dn_sim_connections_closed_total", Some(("reason", reason)))
            }),
            frames_received: FRAME_TYPES
                .map(|t| counter("dn_sim_http2_frames_received_total", Some(("type", t)))),
            goaways_sent: ERROR_CODES
                .map(|c| counter("dn_sim_http2_goaways_sent_total", Some(("code", c)))),
            resets_sent: ERROR_CODES
                .map(|c| counter("dn_sim_http2_resets_sent_total", Some(("code", c)))),
        }
    }

    pub(super) fn closed(&self, reason: CloseReason) {
        let i = CLOSE_REASONS
            .iter()
            .position(|(r, _)| *r == reason)
            .unwrap_or(0);
        self.closed[i].increment(1);
    }
}

/// The label index of error `code`: itself, or `UNKNOWN` for a code RFC 9113 does not define.
pub(super) fn code_index(code: u32) -> usize {
    (code as usize).min(ERROR_CODES.len() - 1)
}
