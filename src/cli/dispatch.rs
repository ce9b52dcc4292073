//! `unavez serve`, `unavez dispatch`, `unavez reprocess` (being written).

use std::process::ExitCode;

use super::Ctx;

#[derive(Debug, clap::Args)]
pub struct ServeArgs {}

#[derive(Debug, clap::Args)]
pub struct DispatchArgs {}

#[derive(Debug, clap::Args)]
pub struct ReprocessArgs {}

pub fn serve(_ctx: &Ctx, _args: ServeArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`unavez serve` is not available yet")
}

pub fn dispatch(_ctx: &Ctx, _args: DispatchArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`unavez dispatch` is not available yet")
}

pub fn reprocess(_ctx: &Ctx, _args: ReprocessArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`unavez reprocess` is not available yet")
}
