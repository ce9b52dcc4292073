//! `unavez doctor` (issue 26 §1): what each check found, typed, and the
//! pure decisions that turn gathered facts (a file mode, free space, a
//! schema version, heartbeat rows, rendered texts) into a status. The app
//! gathers the facts; the console's string table words each finding and
//! its fix in the configured language.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::heartbeat::{Heartbeat, Liveness};
use crate::template_check;
use crate::templates::{MAX_BODY_CHARS, Template};

/// One check of the report, in the report's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckId {
    Config,
    Secrets,
    Ledger,
    Schema,
    LedgerFile,
    Disk,
    Clock,
    Channel,
    Templates,
    Webhooks,
    Listen,
    Dispatchers,
}

impl CheckId {
    pub fn as_str(self) -> &'static str {
        match self {
            CheckId::Config => "config",
            CheckId::Secrets => "secrets",
            CheckId::Ledger => "ledger",
            CheckId::Schema => "schema",
            CheckId::LedgerFile => "ledger_file",
            CheckId::Disk => "disk",
            CheckId::Clock => "clock",
            CheckId::Channel => "channel",
            CheckId::Templates => "templates",
            CheckId::Webhooks => "webhooks",
            CheckId::Listen => "listen",
            CheckId::Dispatchers => "dispatchers",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Skip,
    Warn,
    Fail,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Skip => "skip",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// Why a check did not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// The configuration did not load.
    NoConfig,
    /// The secret in this variable is missing.
    MissingSecret(String),
    /// The ledger could not be opened.
    NoLedger,
    /// The channel did not answer (or refused us).
    ChannelDown,
    /// The check is for the other ledger backend.
    NotSqlite,
    NotPostgres,
    /// No dispatcher ever ran on this ledger.
    NoDispatcherYet,
}

/// What a check found: the facts the message and its fix are worded from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    Skipped(SkipReason),
    ConfigOk {
        path: Option<String>,
        timezone: String,
    },
    ConfigInvalid {
        detail: String,
    },
    SecretsOk {
        vars: Vec<String>,
    },
    SecretsMissing {
        vars: Vec<String>,
    },
    LedgerOk {
        location: String,
        wal: bool,
    },
    LedgerMissing {
        path: String,
    },
    LedgerUnreachable {
        detail: String,
    },
    LedgerDamaged {
        detail: String,
    },
    NotWal {
        journal: String,
    },
    SchemaCurrent {
        version: u32,
    },
    SchemaStale {
        found: u32,
        known: u32,
    },
    SchemaTooNew {
        found: u32,
        known: u32,
    },
    ModeOk {
        mode: u32,
    },
    ModeOpen {
        mode: u32,
    },
    DiskOk {
        free_mb: u64,
        min_mb: u64,
    },
    DiskLow {
        free_mb: u64,
        min_mb: u64,
    },
    ClockOk {
        skew_ms: i64,
    },
    ClockSkewed {
        skew_ms: i64,
    },
    MotorOk {
        instance: String,
    },
    CloudOk {
        display: String,
        name: String,
        quality: String,
        tier: String,
    },
    CloudQualityLow {
        display: String,
        quality: String,
    },
    TokenRejected {
        var: String,
        detail: String,
    },
    InstanceUnknown {
        instance: String,
    },
    InstanceUnlinked {
        instance: String,
    },
    ChannelUnreachable {
        detail: String,
    },
    TemplatesOk {
        count: usize,
    },
    TemplatesDiffer {
        findings: Vec<template_check::Finding>,
    },
    TemplatesTooLong {
        names: Vec<String>,
    },
    NoWabaId,
    CloudWebhookOk {
        public_url: Option<String>,
    },
    MotorWebhookOk,
    WebhookFailed {
        detail: String,
    },
    ListenFree {
        addr: String,
    },
    ListenServing {
        addr: String,
    },
    ListenBusy {
        addr: String,
        detail: String,
    },
    DispatchersAlive {
        count: usize,
        instance: String,
    },
    DispatcherStopped {
        host: String,
        pid: u32,
        ago_s: i64,
        crashed: bool,
    },
    DispatchersOtherInstance {
        instances: Vec<String>,
    },
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub id: CheckId,
    pub status: Status,
    pub finding: Finding,
}

impl Check {
    pub fn new(id: CheckId, status: Status, finding: Finding) -> Check {
        Check { id, status, finding }
    }

    pub fn skip(id: CheckId, why: SkipReason) -> Check {
        Check::new(id, Status::Skip, Finding::Skipped(why))
    }
}

/// The exit status of a report: whether any check warns or fails.
pub fn healthy(checks: &[Check]) -> bool {
    checks.iter().all(|c| matches!(c.status, Status::Ok | Status::Skip))
}

/// A ledger file's permission bits: others may read nothing (0600, or
/// 0660 with a sharing group).
pub fn file_mode(mode: u32) -> Check {
    let mode = mode & 0o777;
    if mode & 0o007 != 0 {
        Check::new(CheckId::LedgerFile, Status::Fail, Finding::ModeOpen { mode })
    } else {
        Check::new(CheckId::LedgerFile, Status::Ok, Finding::ModeOk { mode })
    }
}

/// Free space where the ledger lives against `[doctor] min_free_mb`.
pub fn disk(free_mb: u64, min_mb: u64) -> Check {
    if free_mb < min_mb {
        Check::new(CheckId::Disk, Status::Fail, Finding::DiskLow { free_mb, min_mb })
    } else {
        Check::new(CheckId::Disk, Status::Ok, Finding::DiskOk { free_mb, min_mb })
    }
}

/// The schema version found against this binary's: older is `init`'s
/// to migrate; newer means an older binary on a newer ledger.
pub fn schema(found: u32, known: u32) -> Check {
    let (status, finding) = match found.cmp(&known) {
        std::cmp::Ordering::Equal => (Status::Ok, Finding::SchemaCurrent { version: found }),
        std::cmp::Ordering::Less => (Status::Fail, Finding::SchemaStale { found, known }),
        std::cmp::Ordering::Greater => (Status::Fail, Finding::SchemaTooNew { found, known }),
    };
    Check::new(CheckId::Schema, status, finding)
}

/// The database's clock against this host's: a few seconds is a warning
/// (heartbeats and leases compare the two), a minute a failure.
pub fn clock(skew_ms: i64) -> Check {
    let (status, finding) = match skew_ms.abs() {
        0..=2_000 => (Status::Ok, Finding::ClockOk { skew_ms }),
        2_001..=60_000 => (Status::Warn, Finding::ClockSkewed { skew_ms }),
        _ => (Status::Fail, Finding::ClockSkewed { skew_ms }),
    };
    Check::new(CheckId::Clock, status, finding)
}

/// The engine's length limit: every template rendered with long sample
/// values must fit, or its messages would be held for a person.
pub fn template_lengths(templates: &[Template]) -> Check {
    // A long name, service and place: what a real clinic writes.
    let sample: Vec<String> = (0..9).map(|_| "x".repeat(80)).collect();
    let names: Vec<String> = templates
        .iter()
        .filter(|t| t.render(&sample).chars().count() > MAX_BODY_CHARS)
        .map(|t| t.name.clone())
        .collect();
    if names.is_empty() {
        Check::new(
            CheckId::Templates,
            Status::Ok,
            Finding::TemplatesOk { count: templates.len() },
        )
    } else {
        Check::new(CheckId::Templates, Status::Fail, Finding::TemplatesTooLong { names })
    }
}

/// The dispatchers from their heartbeat rows, with `instance` the channel
/// instance this configuration sends through: none ever ran (skip); some
/// alive (ok, or warn when one sends through another instance on this
/// ledger); none alive now though one beat before (fail).
pub fn dispatchers(beats: &[Heartbeat], instance: &str, now: DateTime<Utc>) -> Check {
    let id = CheckId::Dispatchers;
    if beats.is_empty() {
        return Check::skip(id, SkipReason::NoDispatcherYet);
    }
    let alive: Vec<&Heartbeat> = beats
        .iter()
        .filter(|b| matches!(b.liveness(now), Liveness::Alive(_)))
        .collect();
    if alive.is_empty() {
        let Some(last) = beats.iter().max_by_key(|b| b.beat_at) else {
            return Check::skip(id, SkipReason::NoDispatcherYet);
        };
        return Check::new(
            id,
            Status::Fail,
            Finding::DispatcherStopped {
                host: last.host.clone(),
                pid: last.pid,
                ago_s: (now - last.beat_at).num_seconds().max(0),
                crashed: last.liveness(now) == Liveness::Gone,
            },
        );
    }
    let mut others: Vec<String> = alive
        .iter()
        .filter_map(|b| b.channel_instance.clone())
        .filter(|i| i != instance)
        .collect();
    others.sort();
    others.dedup();
    if !others.is_empty() {
        return Check::new(
            id,
            Status::Warn,
            Finding::DispatchersOtherInstance { instances: others },
        );
    }
    Check::new(
        id,
        Status::Ok,
        Finding::DispatchersAlive {
            count: alive.len(),
            instance: instance.to_string(),
        },
    )
}

#[cfg(test)]
#[path = "doctor_tests.rs"]
mod tests;
