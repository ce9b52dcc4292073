//! `unavez templates check|pull` (issue 26 §2): the configured templates
//! against Meta's, and a templates file written from Meta's approved ones.
//! The comparison and the skeleton are `template_check`'s (pure); this
//! asks Graph and reads or writes the file.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use serde::Serialize;

use super::Ctx;
use super::errors::Said;
use crate::channel::graph::{GraphClient, GraphError};
use crate::config::Config;
use crate::i18n::{self, fill};
use crate::template_check::{self, Finding, MetaTemplate, Problem};

#[derive(Debug, clap::Subcommand)]
pub enum TemplatesCmd {
    /// Compare the configured templates with Meta's (`[channel.cloud]`
    /// waba_id): names, languages, status, body parameters and text.
    /// Writes nothing. Exit 0 all match, 3 some differ.
    Check {
        /// One JSON document on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Write a templates file from Meta's APPROVED templates, for a person
    /// to assign each one its purpose. An existing FILE is only shown as
    /// a diff unless --write.
    Pull {
        #[arg(long)]
        out: PathBuf,
        /// Replace an existing FILE.
        #[arg(long)]
        write: bool,
    },
}

pub fn run(ctx: &Ctx, cmd: TemplatesCmd) -> anyhow::Result<ExitCode> {
    match cmd {
        TemplatesCmd::Check { json } => check(ctx, json),
        TemplatesCmd::Pull { out, write } => pull(ctx, &out, write),
    }
}

/// Meta's templates for the configured account, or the error in the
/// configured language (exit 2 for what the configuration lacks, 1 when
/// Meta cannot be asked).
pub fn fetch(config: &Config) -> anyhow::Result<Vec<MetaTemplate>> {
    let words = i18n::strings(config.language).templates;
    let cloud = &config.channel.cloud;
    if cloud.waba_id.trim().is_empty() {
        return Err(Said::new("no_waba_id", words.no_waba, 2).into());
    }
    let token = crate::config::secret_from_env(&cloud.token_env, "channel.cloud.token_env")
        .map_err(|e| Said::new("missing_secret", e.to_string(), 2))?;
    let client = GraphClient::with_token(cloud, token).map_err(|e| Said::new("config", e.to_string(), 2))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(client.templates(&cloud.waba_id)).map_err(|e| {
        let message = match &e {
            GraphError::TokenRejected { .. } => fill(
                words.token_rejected,
                &[("var", &cloud.token_env), ("detail", &e.to_string())],
            ),
            _ => fill(words.unreachable, &[("detail", &e.to_string())]),
        };
        Said::new("graph", message, 1).into()
    })
}

#[derive(Serialize)]
struct Report<'a> {
    configured: usize,
    at_meta: usize,
    findings: Vec<JsonFinding<'a>>,
}

#[derive(Serialize)]
struct JsonFinding<'a> {
    name: &'a str,
    language: &'a str,
    problem: &'static str,
    message: String,
}

fn problem_code(p: &Problem) -> &'static str {
    match p {
        Problem::Missing { .. } => "missing",
        Problem::NotApproved(_) => "not_approved",
        Problem::ParamsDiffer { .. } => "params_differ",
        Problem::BodyDiffers => "body_differs",
    }
}

fn check(ctx: &Ctx, json: bool) -> anyhow::Result<ExitCode> {
    let words = i18n::strings(ctx.config.language).templates;
    let theirs = fetch(&ctx.config)?;
    let ours = ctx.templates.all();
    let findings: Vec<Finding> = template_check::compare(ours, &theirs);
    let summary = fill(
        words.summary,
        &[("ours", &ours.len().to_string()), ("theirs", &theirs.len().to_string())],
    );
    if json {
        let report = Report {
            configured: ours.len(),
            at_meta: theirs.len(),
            findings: findings
                .iter()
                .map(|f| JsonFinding {
                    name: &f.name,
                    language: &f.language,
                    problem: problem_code(&f.problem),
                    message: words.finding(f),
                })
                .collect(),
        };
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{summary}");
        if findings.is_empty() {
            println!("✓ {}", words.all_match);
        }
        for f in &findings {
            println!("✗ {}", crate::domain::text::inert(&words.finding(f)));
        }
    }
    Ok(if findings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}

fn pull(ctx: &Ctx, out: &std::path::Path, write: bool) -> anyhow::Result<ExitCode> {
    let words = i18n::strings(ctx.config.language).templates;
    let theirs = fetch(&ctx.config)?;
    let text = template_check::skeleton(&theirs, &words.skeleton);
    let approved = theirs
        .iter()
        .filter(|t| t.status == template_check::MetaStatus::Approved && t.body.is_some())
        .count();
    let path = out.display().to_string();
    match std::fs::read_to_string(out) {
        Ok(old) if old == text => {
            println!("{}", fill(words.unchanged, &[("path", &path)]));
            return Ok(ExitCode::SUCCESS);
        }
        Ok(old) if !write => {
            let diff = similar::TextDiff::from_lines(&old, &text);
            print!("{}", diff.unified_diff().context_radius(2).header(&path, "Meta"));
            println!("{}", fill(words.differs, &[("path", &path)]));
            return Ok(ExitCode::from(3));
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(anyhow::Error::new(e).context(format!("reading {path}"))),
    }
    write_atomically(out, &text).with_context(|| format!("writing {path}"))?;
    println!(
        "{}",
        fill(words.written, &[("path", &path), ("n", &approved.to_string())])
    );
    Ok(ExitCode::SUCCESS)
}

/// Writes beside the file and renames over it: a reader never sees half.
fn write_atomically(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}
