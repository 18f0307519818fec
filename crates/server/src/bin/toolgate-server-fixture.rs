//! The sandbox launcher of toolgate-server's own tests; not installed with toolgate. The
//! runtime's sandbox executor re-executes a launcher binary whose `main` calls
//! `toolgate_sandbox::hidden_main` first thing; in a test the current executable is the test
//! binary (libtest would read the hidden argument as a test filter), so the harness points the
//! executor at this binary instead (`env!("CARGO_BIN_EXE_toolgate-server-fixture")`).

fn main() {
    // The hidden modes, as the `toolgate` binary runs them: the launcher, the sandbox's first
    // process, its network bridge, its user-id mapper, and a worker running a built-in.
    if let Some(code) = toolgate_sandbox::hidden_main(toolgate_runtime::worker_tools) {
        std::process::exit(code);
    }
    eprintln!(
        "toolgate-server-fixture: the sandbox launcher of toolgate-server's tests, started by the sandbox executor; it does nothing on its own"
    );
    std::process::exit(2);
}
