//! Strict tools that declare `allowed_hosts` reach exactly those, through the bridge, and only
//! when the network policy allows the address; without declared hosts there is no network.
#![cfg(test)]

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use common::{Harness, command_tool, config};
use serde_json::json;
use toolgate_net::NetPolicy;

/// A TCP server on 127.0.0.1 that answers `pong` and counts connections.
fn pong_server() -> (u16, Arc<AtomicU32>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicU32::new(0));
    let count = Arc::clone(&hits);
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 4];
            let _ = s.read(&mut buf);
            let _ = s.write_all(b"pong");
        }
    });
    (port, hits)
}

const CLIENT: &str = "import socket,sys\ntry:\n    s=socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)\n    s.sendall(b'ping')\n    print(s.recv(16).decode() or 'closed')\nexcept Exception as e:\n    print('refused:', type(e).__name__)";

fn client_tool(name: &str, host: &str, port: u16, allowed: &str) -> String {
    let extra = format!("[run.sandbox]\nallowed_hosts = [{allowed}]");
    command_tool(
        name,
        "strict",
        "/usr/bin/python3",
        &["-c", CLIENT, host, &port.to_string()],
        &extra,
    )
}

#[tokio::test]
async fn an_allowed_host_is_reached_through_the_bridge_and_nothing_else() {
    let (port, hits) = pong_server();
    let (other, other_hits) = pong_server();
    let h = Harness::new();
    let allowed = format!("\"localhost:{port}\"");
    h.add_toml(&client_tool("allowed", "localhost", port, &allowed));
    let r = h.call("allowed", json!({})).await;
    assert_eq!(r.data(), Some(&json!("pong")), "{r:?}");
    assert_eq!(hits.load(Ordering::SeqCst), 1);

    // The same server by address, another port, another name: nothing gets out.
    h.add_toml(&client_tool("by_ip", "127.0.0.1", port, &allowed));
    h.add_toml(&client_tool("other_port", "localhost", other, &allowed));
    for tool in ["by_ip", "other_port"] {
        let r = h.call(tool, json!({})).await;
        assert!(
            r.data().unwrap().as_str().unwrap().starts_with("refused"),
            "{tool}: {r:?}"
        );
    }
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    assert_eq!(other_hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn the_network_policy_still_decides_where_an_allowed_host_may_resolve_to() {
    let (port, hits) = pong_server();
    let mut c = config();
    c.policy = NetPolicy::default();
    let h = Harness::with_config(c);
    h.add_toml(&client_tool(
        "private",
        "localhost",
        port,
        &format!("\"localhost:{port}\""),
    ));
    let r = h.call("private", json!({})).await;
    // The bridge accepts, the executor refuses the loopback address: the connection closes.
    assert_eq!(r.data(), Some(&json!("closed")), "{r:?}");
    assert_eq!(hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn without_declared_hosts_a_strict_tool_has_no_network() {
    let (port, hits) = pong_server();
    let h = Harness::new();
    h.add_toml(&command_tool(
        "no_net",
        "strict",
        "/usr/bin/python3",
        &["-c", CLIENT, "127.0.0.1", &port.to_string()],
        "",
    ));
    let r = h.call("no_net", json!({})).await;
    assert!(
        r.data().unwrap().as_str().unwrap().starts_with("refused"),
        "{r:?}"
    );
    // The same probe without the sandbox does connect: the probe is real.
    h.add_toml(&command_tool(
        "with_net",
        "none",
        "/usr/bin/python3",
        &["-c", CLIENT, "127.0.0.1", &port.to_string()],
        "",
    ));
    let r = h.call("with_net", json!({})).await;
    assert_eq!(r.data(), Some(&json!("pong")), "{r:?}");
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}
