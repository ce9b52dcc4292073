//! How the command line says an error (issue 25 §8): in the configured
//! language, and with `--json` as one JSON document on stdout,
//! `{"error": {"code": "...", "message": "..."}}`, with the same exit
//! code either way.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;

use crate::domain::text::inert;

/// Set once, before parsing: whether the command line asked for `--json`.
/// A process-wide flag because an error may come from before any
/// subcommand's arguments exist (a usage error) or from deep in a
/// handler that only returns `anyhow`.
static JSON: AtomicBool = AtomicBool::new(false);

pub fn set_json(on: bool) {
    JSON.store(on, Ordering::Relaxed);
}

pub fn json() -> bool {
    JSON.load(Ordering::Relaxed)
}

/// An error already worded for a person, with a stable code and the exit
/// status it means. Handlers return it inside `anyhow` and the binary's
/// edge prints it.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Said {
    pub code: &'static str,
    pub message: String,
    pub exit: u8,
}

impl Said {
    pub fn new(code: &'static str, message: impl Into<String>, exit: u8) -> Said {
        Said {
            code,
            message: message.into(),
            exit,
        }
    }
}

#[derive(Serialize)]
struct Doc<'a> {
    error: Body<'a>,
}

#[derive(Serialize)]
struct Body<'a> {
    code: &'a str,
    message: &'a str,
}

/// Prints an error (JSON on stdout with `--json`, `error: …` on stderr
/// otherwise) and gives the exit code.
pub fn fail(code: &str, message: &str, exit: u8) -> ExitCode {
    let message = inert(message);
    if json() {
        let doc = Doc {
            error: Body {
                code,
                message: &message,
            },
        };
        match serde_json::to_string_pretty(&doc) {
            Ok(s) => println!("{s}"),
            Err(_) => println!("{{\"error\":{{\"code\":\"error\",\"message\":\"\"}}}}"),
        }
    } else {
        eprintln!("error: {message}");
    }
    ExitCode::from(exit)
}

/// An identity refusal as an error in the configured language: exit 2
/// for a name that is not configured or missing, 3 for a refusal.
pub fn identity(ctx: &super::Ctx, e: &crate::ops::IdentityError) -> anyhow::Error {
    use crate::ops::IdentityError as E;
    let (code, message) = crate::i18n::strings(ctx.config.language).cli.identity(e);
    let exit = match e {
        E::UnknownOperator { .. } | E::FlagRequired { .. } => 2,
        _ => 3,
    };
    Said::new(code, message, exit).into()
}
