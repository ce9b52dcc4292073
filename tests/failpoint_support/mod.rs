//! The `unavez` command line with failpoints armed, for the few tests that
//! inject a store failure or hold a send. The `unavez` binary has no
//! failpoints (nothing can arm them in the product), so these tests run the
//! chaos harness's binary, which is the same command line built with the
//! `failpoints` feature, re-executed as `unavez-chaos __unavez --failpoints
//! SPEC <unavez args>` (see crates/chaos/src/chaos/failpoints.rs for SPEC).

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// `unavez` with `spec` armed (e.g. `ingest_event:2:error`).
pub fn armed(spec: &str) -> Command {
    let mut c = Command::new(chaos_bin());
    c.args(["__unavez", "--failpoints", spec]);
    c
}

/// The harness binary next to the `unavez` one. A plain `cargo test` builds
/// it (it is a workspace member); a test run on its own
/// (`cargo test --test NAME`) builds it here when it is missing or older
/// than the `unavez` binary.
fn chaos_bin() -> PathBuf {
    let unavez = PathBuf::from(env!("CARGO_BIN_EXE_unavez"));
    let bin = unavez.with_file_name(format!("unavez-chaos{}", std::env::consts::EXE_SUFFIX));
    let modified = |p: &PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if modified(&bin).is_none() || modified(&bin) < modified(&unavez) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build.args(["build", "-p", "unavez-chaos", "--bin", "unavez-chaos"]);
        if unavez.components().any(|c| c.as_os_str() == "release") {
            build.arg("--release");
        }
        let status = build.status().expect("running cargo to build unavez-chaos");
        assert!(status.success(), "building unavez-chaos for a failpoint test failed");
    }
    bin
}
