//! The sandbox launcher of toolgate-runtime's own tests; not installed with toolgate. The
//! sandbox re-executes a launcher binary whose `main` calls `toolgate_sandbox::hidden_main`
//! first thing; in a test the current executable is the test binary, so the tests point the
//! runtime at this binary instead (`env!("CARGO_BIN_EXE_toolgate-runtime-fixture")`): stdio
//! upstream servers then start in the real sandbox, as under `toolgate serve`.

fn main() {
    if let Some(code) = toolgate_sandbox::hidden_main(toolgate_runtime::worker_tools) {
        std::process::exit(code);
    }
    eprintln!(
        "toolgate-runtime-fixture: the sandbox launcher of toolgate-runtime's tests, started by the sandbox; it does nothing on its own"
    );
    std::process::exit(2);
}
