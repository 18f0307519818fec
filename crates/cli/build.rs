//! Lays out the functions a serving `toolgate` runs next to each other (issue 24).
//!
//! The kernel maps code 64 KiB around each page fault, so resident code follows how many 64 KiB
//! blocks the running functions touch, not their size. `symbol-order.txt` (made by
//! `scripts/code-order.sh` from a `--release` build) lists the functions that run once serving,
//! hottest first, then those only startup runs; rust-lld's `--symbol-ordering-file` places them
//! in that order. Only `--release` builds (the names are a release build's: other profiles hash
//! different names) for x86_64 Linux with Rust's default linker (rust-lld; another linker may
//! not know the option) get it. `TOOLGATE_SYMBOL_ORDER=0` builds without it. A name the linker
//! does not find (a stale order) is skipped.

use std::env;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=symbol-order.txt");
    for var in [
        "TOOLGATE_SYMBOL_ORDER",
        "RUSTFLAGS",
        "RUSTC_LINKER",
        "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER",
        "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let var = |name: &str| env::var(name).unwrap_or_default();
    let wanted = var("TOOLGATE_SYMBOL_ORDER") != "0";
    // `PROFILE` is "release" for every profile that inherits from release (`dist`, `bench`);
    // the profile's own directory, the one that holds `build/`, tells `--release` apart.
    let out_dir = var("OUT_DIR");
    let parts: Vec<&str> = Path::new(&out_dir)
        .iter()
        .filter_map(|part| part.to_str())
        .collect();
    let release = parts.windows(2).any(|pair| pair == ["release", "build"]);
    let target = var("TARGET") == "x86_64-unknown-linux-gnu";
    // A linker of the user's choosing (`target.<triple>.linker`, `-C linker=…`, `-C
    // linker-features=…`, `-C link-self-contained=…`, `-C link-arg=-fuse-ld=mold`) may not be
    // lld.
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    let default_linker = env::var_os("RUSTC_LINKER").is_none()
        && !flags.split('\x1f').any(|flag| {
            ["linker", "link-self-contained", "link-arg", "fuse-ld"]
                .iter()
                .any(|word| flag.contains(word))
        });
    let manifest = var("CARGO_MANIFEST_DIR");
    let order = Path::new(&manifest).join("symbol-order.txt");
    if wanted && release && target && default_linker && order.is_file() {
        // `-Xlinker` pairs, not `-Wl,…`: a path with a comma stays one argument.
        for arg in [
            "-Xlinker".to_owned(),
            format!("--symbol-ordering-file={}", order.display()),
            "-Xlinker".to_owned(),
            "--no-warn-symbol-ordering".to_owned(),
        ] {
            println!("cargo:rustc-link-arg-bin=toolgate={arg}");
        }
    }
}
