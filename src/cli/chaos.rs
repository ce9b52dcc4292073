//! `unavez chaos` (being written).

use std::process::ExitCode;

use super::Ctx;

#[derive(Debug, clap::Args)]
pub struct ChaosArgs {}

pub fn run(_ctx: &Ctx, _args: ChaosArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`unavez chaos` is not available yet")
}
