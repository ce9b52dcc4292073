//! `unavez sim` (being written).

use std::process::ExitCode;

use super::Ctx;

#[derive(Debug, clap::Args)]
pub struct SimArgs {}

pub fn run(_ctx: &Ctx, _args: SimArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`unavez sim` is not available yet")
}
