//! `unavez tui` and `unavez demo` (being written).

use std::process::ExitCode;

use super::Ctx;

#[derive(Debug, clap::Args)]
pub struct TuiArgs {}

#[derive(Debug, clap::Args)]
pub struct DemoArgs {}

pub fn tui(_ctx: &Ctx, _args: TuiArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`unavez tui` is not available yet")
}

pub fn demo(_ctx: &Ctx, _args: DemoArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`unavez demo` is not available yet")
}
