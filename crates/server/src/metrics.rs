//! `/metrics`: the `metrics` facade rendered in Prometheus text format. The recorder is global
//! to the process, so it is installed once and shared.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Seconds: from 100 µs (a validation, an in-process call) to 60 s (a slow external call).
const LATENCY_BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 10.0, 60.0,
];

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the Prometheus recorder as the process's `metrics` recorder (once) and returns the
/// handle that renders it; `None` if another recorder was installed first.
pub fn install_prometheus() -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            // Buckets make histograms Prometheus histograms (aggregatable across instances, and
            // one bucket increment per observation) instead of client-side summaries.
            let builder = PrometheusBuilder::new()
                .set_buckets(&LATENCY_BUCKETS)
                .unwrap_or_else(|_| PrometheusBuilder::new());
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            match metrics::set_global_recorder(recorder) {
                Ok(()) => {
                    toolgate_core::telemetry::describe();
                    Some(handle)
                }
                Err(e) => {
                    tracing::warn!(error = %e, "another metrics recorder is installed; /metrics will be empty");
                    None
                }
            }
        })
        .clone()
}

/// The current metrics in Prometheus text format.
pub(crate) fn render() -> String {
    match install_prometheus() {
        Some(handle) => handle.render(),
        None => "# metrics unavailable: another recorder is installed in this process\n".to_owned(),
    }
}
