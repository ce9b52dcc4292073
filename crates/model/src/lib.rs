//! A model checker of the "una vez" protocol over the real core rules
//! (issue 28; docs/verification.md). Dev only: not in the workspace's
//! default members, never in the product build.
//!
//! The actors (dispatchers, the reconciler, the idempotent engine and its
//! webhooks, the booking source, supervisors) only move messages and crash;
//! every decision calls `unavez-core`: validity and the claim rule, the
//! state machine, the pre-send re-check, lease recovery, the reconciler's
//! choice and its review, `finish::decide` on a recorded answer and the
//! operator guards ([`rules`], which remembers core's answers by their
//! whole input).
//! [stateright] explores every interleaving within [`Bounds`], depth-first
//! with symmetry reduction over dispatchers and supervisors and the
//! reductions of [`dead`].
//!
//! Modules:
//! - [`world`]: the state (ledger rows, engine, processes, fault budget),
//!   `Copy` and compact, its symmetry representative, and the [`Bounds`];
//! - [`model`]: the [`stateright::Model`] ([`Una`]), its [`Action`]s and
//!   the [`Mutation`] switch that weakens one rule;
//! - [`step`]: each action's effect;
//! - [`dead`]: the values nothing reads again (forgotten by the
//!   representative) and the webhooks delivered at once;
//! - [`rules`]: the calls into core;
//! - [`props`]: the properties (all `always`);
//! - [`trace`]: counterexamples as readable traces, and their replay.

pub mod dead;
pub mod model;
pub mod props;
pub mod rules;
pub mod step;
pub mod trace;
pub mod world;

pub use model::{Action, Mutation, Una};
pub use world::Bounds;
