//! The server tests' harness: `toolgate_test_support::server` (a gateway over the production
//! runtime, sandbox executor and policy client included) with this package's fixture binary as
//! the sandbox launcher (`src/bin/toolgate-server-fixture.rs`; a test binary cannot be one).
#![cfg(test)]
#![allow(dead_code, unused_imports)]

pub mod mcp;

use std::ops::Deref;
use std::path::Path;

use toolgate_net::NetPolicy;
use toolgate_server::{GatewayOptions, PrincipalEntry};
pub use toolgate_test_support::server::{Reply, big_tool, principal, slow_tool};

/// The binary the sandbox executor re-executes as its launcher.
pub const LAUNCHER: &str = env!("CARGO_BIN_EXE_toolgate-server-fixture");

fn launcher() -> &'static Path {
    Path::new(LAUNCHER)
}

/// [`toolgate_test_support::server::Harness`] launching the sandbox through [`LAUNCHER`].
pub struct Harness(toolgate_test_support::server::Harness);

impl Deref for Harness {
    type Target = toolgate_test_support::server::Harness;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Harness {
    pub async fn new(principals: Vec<PrincipalEntry>) -> Self {
        Self(toolgate_test_support::server::Harness::new(launcher(), principals).await)
    }

    pub async fn with_options(options: GatewayOptions) -> Self {
        Self(toolgate_test_support::server::Harness::with_options(launcher(), options).await)
    }

    pub async fn with_network(options: GatewayOptions, network: NetPolicy) -> Self {
        Self(
            toolgate_test_support::server::Harness::with_network(launcher(), options, network)
                .await,
        )
    }

    pub async fn with_config(options: GatewayOptions, config: toolgate_runtime::Config) -> Self {
        Self(toolgate_test_support::server::Harness::with_config(launcher(), options, config).await)
    }

    pub async fn on_postgres(options: GatewayOptions) -> Option<Self> {
        toolgate_test_support::server::Harness::on_postgres(launcher(), options)
            .await
            .map(Self)
    }

    pub async fn cleanup(self) {
        self.0.cleanup().await;
    }
}
