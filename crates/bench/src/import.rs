//! File import: the same agenda as a CSV export and as JSONL booking
//! events, each through `unavez import`'s own path (`import_file`) into a
//! fresh ledger. CSV rows carry no event id or version (both are derived
//! from the row), so the two files differ only in how they are read; the
//! ratio says what reading CSV costs beside JSONL.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use anyhow::Context as _;
use chrono::{Duration, Utc};
use unavez::config::Config;
use unavez::import::{ImportOptions, import_file};
use unavez::planner::Planner;
use unavez::store::Store;
use unavez::templates::Templates;

pub struct Import {
    pub rows: u64,
    pub jsonl_s: f64,
    pub csv_s: f64,
    pub stored: u64,
}

/// Writes `rows` appointments three to ten days ahead as both files, then
/// imports each into a ledger of its own.
pub fn run(dir: &Path, rows: u64) -> anyhow::Result<Import> {
    let now = Utc::now();
    let mut csv = String::from("ref,starts_at,phone,name,service,location,status\n");
    let mut jsonl = String::new();
    for i in 0..rows {
        let starts = (now + Duration::days(3) + Duration::minutes((i % (7 * 24 * 60)) as i64))
            .fixed_offset()
            .to_rfc3339();
        let phone = format!("+519{:08}", i % 40_000);
        // The same patient under the same name at each booking.
        let name = format!("Paciente {}", i % 40_000);
        writeln!(
            csv,
            "imp-{i:06},{starts},{phone},{name},Odontología,Sede Miraflores,scheduled"
        )?;
        let event = serde_json::json!({
            "event_id": format!("imp-evt-{i:06}"), "type": "appointment.scheduled",
            "ref": format!("imp-{i:06}"), "starts_at": starts,
            "contact": {"phone": phone, "name": name},
            "service": "Odontología", "location": "Sede Miraflores",
        });
        writeln!(jsonl, "{event}")?;
    }
    let (jsonl_s, stored_j) = import_one(dir, "agenda.jsonl", &jsonl, now)?;
    let (csv_s, stored_c) = import_one(dir, "agenda.csv", &csv, now)?;
    anyhow::ensure!(
        stored_j == stored_c,
        "the two files stored {stored_j} and {stored_c} events"
    );
    Ok(Import {
        rows,
        jsonl_s,
        csv_s,
        stored: stored_c,
    })
}

fn import_one(dir: &Path, name: &str, text: &str, now: chrono::DateTime<Utc>) -> anyhow::Result<(f64, u64)> {
    let file = dir.join(name);
    std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
    let config = Config::default();
    let templates = Templates::embedded();
    let planner = Planner::new(&config.policy, &templates, config.tz());
    let mut store = Store::open(&dir.join(format!("{name}.db")))?;
    let opts = ImportOptions {
        skip_invalid: false,
        rejects_path: None,
        source: name.into(),
    };
    let t = Instant::now();
    let report = import_file(&mut store, &planner, &file, &opts, now).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok((t.elapsed().as_secs_f64(), report.stored as u64))
}
