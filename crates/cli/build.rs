//! Lays out the functions a serving `toolgate` runs next to each other (issue 24).
//!
//! The kernel maps code 64 KiB around each page fault, so resident code follows how many 64 KiB
//! blocks the running functions touch, not their size. `symbol-order.txt` (made by
//! `scripts/code-order.sh`) lists the functions that run once serving, hottest first, then
//! those only startup runs; rust-lld's `--symbol-ordering-file` places them in that order at
//! the start of `.text`. Only release builds for x86_64 Linux with Rust's default linker
//! (rust-lld) get it: the names are those of a release build, and another linker may not know
//! the option. `TOOLGATE_SYMBOL_ORDER=0` builds without it. A name the linker does not find
//! (a stale order) is skipped; the build never fails because of the order.

use std::env;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=symbol-order.txt");
    println!("cargo:rerun-if-env-changed=TOOLGATE_SYMBOL_ORDER");
    let var = |name: &str| env::var(name).unwrap_or_default();
    let wanted = var("TOOLGATE_SYMBOL_ORDER") != "0";
    let release = var("PROFILE") == "release";
    let target = var("TARGET") == "x86_64-unknown-linux-gnu";
    // A linker of the user's choosing (`target.<triple>.linker`, `-C linker=…`, `-C
    // linker-features=…`, `-C link-self-contained=…`) may not be lld.
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    let default_linker = env::var_os("RUSTC_LINKER").is_none()
        && !flags
            .split('\x1f')
            .any(|flag| flag.contains("linker") || flag.contains("link-self-contained"));
    let manifest = var("CARGO_MANIFEST_DIR");
    let order = Path::new(&manifest).join("symbol-order.txt");
    if wanted && release && target && default_linker && order.is_file() {
        println!(
            "cargo:rustc-link-arg-bin=toolgate=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bin=toolgate=-Wl,--no-warn-symbol-ordering");
    }
}
