//! `/metrics`: the `metrics` facade rendered in Prometheus text format. The recorder is global
//! to the process, so it is installed once and shared.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the Prometheus recorder as the process's `metrics` recorder (once) and returns the
/// handle that renders it; `None` if another recorder was installed first.
pub fn install_prometheus() -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
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
