//! The `unavez` binary: a thin edge over the library (see `src/lib.rs`).

use std::process::ExitCode;

/// The dispatcher and the importer allocate many small, short-lived values
/// per message (statement values, JSON, HTTP headers); glibc's malloc was
/// the largest single cost in their profiles.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    match unavez::cli::run() {
        Ok(code) => code,
        // Errors quote input and stored text (keys, file rows): `fail`
        // makes them inert, so a control character in them never acts on
        // the terminal; with --json they are one JSON document on stdout.
        Err(e) => match e.downcast_ref::<unavez::cli::errors::Said>() {
            Some(said) => unavez::cli::errors::fail(said.code, &said.message, said.exit),
            None => unavez::cli::errors::fail("error", &describe(&e), 1),
        },
    }
}

/// The error and its causes on one line, skipping a cause whose text the
/// message before it already includes (library errors name their cause in
/// their own message so they read well on their own too).
fn describe(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}
