//! The `unavez` binary: a thin edge over the library (see `src/lib.rs`).

use std::process::ExitCode;

fn main() -> ExitCode {
    match unavez::cli::run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
