//! The bridged network of `strict` tools that declare `allowed_hosts`.
//!
//! The program runs in its own network namespace, where only loopback is up. Each allowed
//! `host:port` gets a stand-in address 127.0.0.(2 + i) in a private `/etc/hosts` (bind-mounted in
//! the sandbox's own mount namespace), and a bridge process inside the namespace listens there
//! and forwards each connection over a Unix socket to the executor's connector, which connects
//! to the real host after the network policy's checks. Nothing else is reachable: no other
//! address, no UDP (so no DNS), no raw sockets. Landlock additionally limits TCP connects to the
//! declared ports.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};

use nix::mount::{MsFlags, mount};
use nix::sys::socket::{
    AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, recv, sendto, socket,
};

use crate::launch_spec::{LaunchSpec, NetMode, SPEC_ENV};

/// argv[1] of the bridge process.
pub const BRIDGE_ARG: &str = "__toolgate-sandbox-bridge";

/// The stand-in address of the `i`-th allowed host.
pub fn stand_in(i: usize) -> Ipv4Addr {
    let i = u8::try_from(i + 2).unwrap_or(u8::MAX);
    Ipv4Addr::new(127, 0, 0, i)
}

/// The hosts file that maps every allowed host to its stand-in.
pub fn hosts_file(hosts: &[(String, u16)]) -> String {
    let mut out = String::new();
    if !hosts.iter().any(|(h, _)| h == "localhost") {
        out.push_str("127.0.0.1 localhost\n");
    }
    let mut seen = Vec::new();
    for (i, (host, _)) in hosts.iter().enumerate() {
        if !seen.contains(host) {
            out.push_str(&format!("{} {host}\n", stand_in(i)));
            seen.push(host.clone());
        }
    }
    out
}

/// Brings loopback up with one RTM_NEWLINK request (the interface index of `lo` is 1 in a new
/// network namespace).
fn loopback_up() -> Result<(), String> {
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )
    .map_err(|e| format!("netlink socket: {e}"))?;
    let mut msg = Vec::with_capacity(32);
    msg.extend_from_slice(&32u32.to_ne_bytes()); // nlmsg_len
    msg.extend_from_slice(&libc::RTM_NEWLINK.to_ne_bytes()); // nlmsg_type
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16;
    msg.extend_from_slice(&flags.to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes()); // seq
    msg.extend_from_slice(&0u32.to_ne_bytes()); // pid
    msg.push(libc::AF_UNSPEC as u8); // ifi_family
    msg.push(0);
    msg.extend_from_slice(&0u16.to_ne_bytes()); // ifi_type
    msg.extend_from_slice(&1i32.to_ne_bytes()); // ifi_index: lo
    let up = libc::IFF_UP as u32;
    msg.extend_from_slice(&up.to_ne_bytes()); // ifi_flags
    msg.extend_from_slice(&up.to_ne_bytes()); // ifi_change
    sendto(
        fd.as_raw_fd(),
        &msg,
        &NetlinkAddr::new(0, 0),
        MsgFlags::empty(),
    )
    .map_err(|e| format!("netlink send: {e}"))?;
    let mut buf = [0u8; 256];
    let n = recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty())
        .map_err(|e| format!("netlink recv: {e}"))?;
    // nlmsghdr (16 bytes) then nlmsgerr { int error; ... }: 0 is the acknowledgement.
    let code = buf
        .get(16..20)
        .filter(|_| n >= 20)
        .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or("short netlink answer")?;
    if code != 0 {
        return Err(format!("bringing loopback up failed: errno {}", -code));
    }
    Ok(())
}

/// Stage 2's network setup: loopback up, private `/etc/hosts`, the bridge process started and
/// listening before the program runs.
pub(crate) fn setup(file: &Path) -> Result<(), String> {
    let fail = |e: String| format!("could not set up the sandbox network for allowed_hosts: {e}");
    loopback_up().map_err(fail)?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| fail(format!("private mounts: {e}")))?;
    mount(
        Some(file),
        "/etc/hosts",
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(|e| fail(format!("mounting the hosts file over /etc/hosts: {e}")))?;
    let mut child = Command::new(crate::launcher::SELF_EXE)
        .arg(BRIDGE_ARG)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| fail(format!("starting the bridge: {e}")))?;
    let mut ready = [0u8; 1];
    let ok = child
        .stdout
        .take()
        .map(|mut out| out.read_exact(&mut ready).is_ok() && ready[0] == b'+')
        .unwrap_or(false);
    if !ok {
        return Err(fail("the bridge did not start listening".to_owned()));
    }
    // The bridge stays a child of this process, which becomes the program: it dies with the
    // namespace when the program exits.
    Ok(())
}

fn pipe(mut from: impl Read, mut to: impl Write, done: impl FnOnce()) {
    let _ = std::io::copy(&mut from, &mut to);
    done();
}

fn serve_one(conn: TcpStream, socket: &Path, index: usize) {
    let Ok(mut up) = UnixStream::connect(socket) else {
        return;
    };
    if up.write_all(format!("{index}\n").as_bytes()).is_err() {
        return;
    }
    let (Ok(conn2), Ok(up2)) = (conn.try_clone(), up.try_clone()) else {
        return;
    };
    let t = std::thread::spawn(move || {
        pipe(&conn2, &up2, || {
            let _ = up2.shutdown(Shutdown::Write);
        });
    });
    pipe(&up, &conn, || {
        let _ = conn.shutdown(Shutdown::Write);
    });
    let _ = t.join();
}

/// The bridge process: listens on every stand-in, prints `+` once all listen.
pub fn bridge_main() -> i32 {
    let spec: Option<LaunchSpec> = std::env::var(SPEC_ENV)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok());
    let Some(NetMode::Bridged { socket, hosts, .. }) = spec.map(|s| s.net) else {
        eprintln!("toolgate-sandbox: the bridge was started without a bridged network spec");
        return 2;
    };
    let mut listeners = Vec::new();
    for (i, (_, port)) in hosts.iter().enumerate() {
        match TcpListener::bind((stand_in(i), *port)) {
            Ok(l) => listeners.push((i, l)),
            Err(e) => {
                eprintln!(
                    "toolgate-sandbox: the bridge could not listen on {}:{port}: {e}",
                    stand_in(i)
                );
                return 2;
            }
        }
    }
    let mut handles = Vec::new();
    for (i, listener) in listeners {
        let socket = socket.clone();
        handles.push(std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let socket = socket.clone();
                std::thread::spawn(move || serve_one(conn, &socket, i));
            }
        }));
    }
    let mut out = std::io::stdout();
    let _ = out.write_all(b"+");
    let _ = out.flush();
    for h in handles {
        let _ = h.join();
    }
    0
}
