//! The console's own screens (`unavez::tui`, `src/store/console.rs`) on the
//! large ledger: the first frame drawn into a ratatui `TestBackend` through
//! the console's real load path, and each screen's query.

use std::path::Path;
use std::time::Instant;

use chrono::{DateTime, Duration, Utc};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use unavez::config::{Config, Role};
use unavez::domain::intention::operating_day;
use unavez::store::{AttentionQuery, CounterQuery, Store, StoreError, open_connection};
use unavez::templates::Templates;
use unavez::tui::app::App;
use unavez::tui::keys::Access;
use unavez::tui::worker::{WorkerCtx, handle};

use crate::console::Probe;
use crate::report::{peak_rss_mib, percentile};

fn time_ms<T>(f: impl FnOnce() -> Result<T, StoreError>) -> Result<(f64, T), StoreError> {
    let t = Instant::now();
    let v = f()?;
    Ok((t.elapsed().as_secs_f64() * 1000.0, v))
}

fn summarize(name: &str, mut v: Vec<f64>) -> (String, f64, f64, usize) {
    v.sort_by(f64::total_cmp);
    (name.to_string(), percentile(&v, 50.0), percentile(&v, 95.0), v.len())
}

/// Runs in the probe child: `started` is its first instant.
pub fn probe(started: Instant, db: &Path, now: DateTime<Utc>, samples: usize) -> anyhow::Result<Probe> {
    // As the console opens it (generic plans on PostgreSQL).
    let location = unavez_ledger::location::Location::parse(db)?.for_console();
    let (open_ms, mut store) = time_ms(|| Store::attach_location(&location))?;
    let config = Config::default();
    let tz = config.tz();
    let ctx = WorkerCtx {
        config,
        templates: Templates::embedded(),
        reprocess: None,
        control: None,
    };
    // The first frame exactly as the console builds it: the app's load
    // requests through the database worker's handler, then a draw.
    let mut app = App::new(
        unavez::i18n::strings(ctx.config.language),
        "recepcion",
        Access {
            role: Role::FrontDesk,
            read_only: false,
        },
        tz,
        now,
    );
    let mut queue: std::collections::VecDeque<_> = app.load().into();
    while let Some(r) = queue.pop_front() {
        let resp = handle(&mut store, &ctx, r);
        queue.extend(app.on_response(resp));
    }
    let mut term = Terminal::new(TestBackend::new(120, 40))?;
    term.draw(|f| unavez::tui::view::draw(f, &app))?;
    let first_frame_ms = started.elapsed().as_secs_f64() * 1000.0;

    let intentions = count_intentions(db)?;
    let day = |k: usize| operating_day(now + Duration::days(k as i64 % 90 - 60), tz);
    let (mut att, mut up, mut board, mut counter, mut detail, mut point) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let mut search: Vec<Vec<f64>> = vec![vec![]; SEARCH_FORMS.len()];
    let mut search_up: Vec<Vec<f64>> = vec![vec![]; SEARCH_FORMS.len()];
    let contacts = (intentions / 10 + 1).max(1) as u64;
    let commitments = (intentions / 3).max(1) as u64;
    for k in 0..samples {
        let id = (crate::mix(k as u64) % intentions.max(1) as u64) as i64 + 1;
        store.read(|tx| {
            let mut q = AttentionQuery::new(now);
            q.offset = (k % 4 * 50) as u32;
            att.push(time_ms(|| tx.attention(&q))?.0);
            let from = now + Duration::days((k % 30) as i64);
            up.push(time_ms(|| tx.upcoming(from, from + Duration::days(1), None, 50, 0))?.0);
            board.push(time_ms(|| tx.board(day(k)))?.0);
            let cq = CounterQuery {
                day: day(k),
                states: vec!["uncertain".into(), "review".into()],
                reason: None,
            };
            counter.push(time_ms(|| tx.counter_rows(&cq, 50, 0))?.0);
            // A patient who calls: by every form the front desk types
            // (see `search_forms`), each timed on both searched screens.
            let contact = crate::mix(k as u64 ^ 0x5eed) % contacts + 1;
            let cid = crate::mix(k as u64 ^ 0xc1d) % commitments + 1;
            for (f, text) in search_forms(contact, cid).into_iter().enumerate() {
                let mut q = AttentionQuery::new(now);
                q.filter = Some(text.clone());
                search[f].push(time_ms(|| tx.attention(&q))?.0);
                let from = now - Duration::days(60);
                search_up[f].push(time_ms(|| tx.upcoming(from, from + Duration::days(90), Some(&text), 50, 0))?.0);
            }
            let (ms, row) = time_ms(|| tx.intention(id))?;
            point.push(ms);
            detail.push(time_ms(|| tx.intention_detail(&row.key))?.0);
            Ok::<_, StoreError>(())
        })?;
    }
    point.sort_by(f64::total_cmp);
    Ok(Probe {
        intentions,
        open_ms,
        first_frame_ms,
        first_frame_kind: "console load requests through the worker + draw into a 120x40 TestBackend".into(),
        queries: [
            summarize("Atención (attention page)", att),
            summarize("Próximas citas (upcoming day)", up),
            summarize("Tablero (board of a day)", board),
            summarize("Tablero counter rows", counter),
            summarize("Detalle (intention detail)", detail),
        ]
        .into_iter()
        .chain(
            SEARCH_FORMS
                .iter()
                .zip(search)
                .map(|(form, v)| summarize(&format!("search: Atención, {form}"), v)),
        )
        .chain(
            SEARCH_FORMS
                .iter()
                .zip(search_up)
                .map(|(form, v)| summarize(&format!("search: Próximas citas (90 days), {form}"), v)),
        )
        .collect(),
        point_p50_ms: percentile(&point, 50.0),
        point_p95_ms: percentile(&point, 95.0),
        peak_rss_mib: peak_rss_mib().unwrap_or(f64::NAN),
    })
}

/// What the front desk types to find a patient, one figure each.
const SEARCH_FORMS: [&str; 9] = [
    "phone as dialled (9xx xxx xxx)",
    "phone with country code (+51 9xx-xxx-xxx)",
    "last 6 digits",
    "last 4 digits",
    "name (first name, surname)",
    "name, surname first",
    "name with one typo",
    "reference",
    "key read out",
];

/// The texts of [`SEARCH_FORMS`] for generated contact `contact` (phone
/// and name as `ledger_shape` generates them) and commitment `cid`.
fn search_forms(contact: u64, cid: u64) -> [String; 9] {
    let phone = crate::ledger_shape::patient_phone(contact);
    let national = &phone[3..];
    let name = crate::ledger_shape::patient_name(contact);
    let words: Vec<&str> = name.split(' ').collect();
    [
        format!("{} {} {}", &national[..3], &national[3..6], &national[6..]),
        format!("+51 {}-{}-{}", &national[..3], &national[3..6], &national[6..]),
        national[national.len() - 6..].to_string(),
        national[national.len() - 4..].to_string(),
        format!("{} {}", words[0], words[1]),
        format!("{} {}", words[1].to_lowercase(), words[0].to_lowercase()),
        format!("{} {}", words[0].to_lowercase(), one_typo(&words[1].to_lowercase())),
        format!("cita-{cid:06}"),
        format!("cita-{cid:06}:recordatorio-24h"),
    ]
}

/// `word` with its second and third letters swapped (replaced when they
/// are the same letter): one typo, as a hurried receptionist makes.
fn one_typo(word: &str) -> String {
    let mut c: Vec<char> = word.chars().collect();
    if c[1] == c[2] {
        c[2] = if c[2] == 'x' { 'y' } else { 'x' };
    } else {
        c.swap(1, 2);
    }
    c.into_iter().collect()
}

/// How many intentions the probed ledger holds, on either backend.
fn count_intentions(db: &Path) -> anyhow::Result<i64> {
    let setting = db.to_string_lossy();
    if setting.starts_with("postgres") {
        let mut c = postgres::Client::connect(&setting, postgres::NoTls)?;
        return Ok(c.query_one("SELECT count(*) FROM intentions", &[])?.get(0));
    }
    Ok(crate::ledger_shape::count_intentions(&open_connection(db)?)?)
}
