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
use unavez::store::{AttentionQuery, CounterQuery, Store, StoreError, Tx, open_connection};
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
///
/// Three passes after the first frame, so that a cold cache and a warm one
/// are reported apart (a million intentions do not fit in PostgreSQL's
/// default shared buffers, and the first statement to read a patient's rows
/// pays their page reads):
/// 1. a warm-up, untimed: every screen over the same spread of days and
///    pages (there are only 90 days), and every search form over patients
///    the timed passes never use, as a console in use leaves the server;
/// 2. the first look-up: each form typed for a patient of its own, never
///    looked up before (a new caller), timed: the figures the targets judge;
/// 3. the same texts again (the caller calls back), timed apart.
pub fn probe(started: Instant, db: &Path, now: DateTime<Utc>, samples: usize) -> anyhow::Result<Probe> {
    // As the console opens it (generic plans on PostgreSQL).
    let location = unavez_ledger::location::Location::parse(db)?.for_console();
    let (open_ms, mut store) = time_ms(|| Store::attach_location(&location))?;
    let first_frame_ms = first_frame(started, &mut store, now)?;
    let intentions = count_intentions(db)?;
    let space = Space {
        intentions,
        contacts: (intentions / 10 + 1).max(1) as u64,
        commitments: (intentions / 3).max(1) as u64,
        now,
        tz: Config::default().tz(),
    };
    let mut t = Timings::new();
    let warmup = samples.div_ceil(2);
    for k in 0..warmup {
        store.read(|tx| space.sample(tx, WARMUP + k as u64, &mut Timings::new()))?;
    }
    for k in 0..samples {
        store.read(|tx| space.sample(tx, k as u64, &mut t))?;
    }
    let mut again = Timings::new().search;
    for k in 0..samples {
        store.read(|tx| space.searches(tx, k as u64, &mut again))?;
    }
    let Timings {
        att,
        up,
        board,
        counter,
        detail,
        mut point,
        search: searches,
    } = t;
    point.sort_by(f64::total_cmp);
    let screens = [
        ("Atención (attention page)", att),
        ("Próximas citas (upcoming day)", up),
        ("Tablero (board of a day)", board),
        ("Tablero counter rows", counter),
        ("Detalle (intention detail)", detail),
    ];
    let mut queries: Vec<_> = screens.into_iter().map(|(n, v)| summarize(n, v)).collect();
    queries.extend(search_rows(searches, "first look-up"));
    queries.extend(search_rows(again, "same caller again"));
    Ok(Probe {
        intentions,
        open_ms,
        first_frame_ms,
        first_frame_kind: "console load requests through the worker + draw into a 120x40 TestBackend".into(),
        queries,
        warmup,
        point_p50_ms: percentile(&point, 50.0),
        point_p95_ms: percentile(&point, 95.0),
        peak_rss_mib: peak_rss_mib().unwrap_or(f64::NAN),
    })
}

/// Where the warm-up's samples start: far from the timed ones, so that no
/// patient or commitment of theirs is one the timed passes search for.
const WARMUP: u64 = 1 << 40;

/// The first frame exactly as the console builds it: the app's load
/// requests through the database worker's handler, then a draw. Returns
/// the milliseconds since the child started.
fn first_frame(started: Instant, store: &mut Store, now: DateTime<Utc>) -> anyhow::Result<f64> {
    let config = Config::default();
    let tz = config.tz();
    let ctx = WorkerCtx {
        config,
        templates: Templates::embedded(),
        reprocess: None,
        control: None,
    };
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
        let resp = handle(store, &ctx, r);
        queue.extend(app.on_response(resp));
    }
    let mut term = Terminal::new(TestBackend::new(120, 40))?;
    term.draw(|f| unavez::tui::view::draw(f, &app))?;
    Ok(started.elapsed().as_secs_f64() * 1000.0)
}

/// Milliseconds per screen, one entry per sample.
#[derive(Default)]
struct Timings {
    att: Vec<f64>,
    up: Vec<f64>,
    board: Vec<f64>,
    counter: Vec<f64>,
    detail: Vec<f64>,
    point: Vec<f64>,
    /// Per form, Atención's then Próximas citas' (see [`search_rows`]).
    search: Vec<Vec<f64>>,
}

impl Timings {
    fn new() -> Timings {
        Timings {
            search: vec![vec![]; 2 * SEARCH_FORMS.len()],
            ..Timings::default()
        }
    }
}

/// The generated ledger's sizes and clock, which a sample's ids fall in.
struct Space {
    intentions: i64,
    contacts: u64,
    commitments: u64,
    now: DateTime<Utc>,
    tz: chrono_tz::Tz,
}

impl Space {
    /// Sample `k`: every screen once, then every search form.
    fn sample(&self, tx: &Tx<'_>, k: u64, t: &mut Timings) -> Result<(), StoreError> {
        let now = self.now;
        let day = operating_day(now + Duration::days((k % 90) as i64 - 60), self.tz);
        let mut q = AttentionQuery::new(now);
        q.offset = (k % 4 * 50) as u32;
        t.att.push(time_ms(|| tx.attention(&q))?.0);
        let from = now + Duration::days((k % 30) as i64);
        t.up.push(time_ms(|| tx.upcoming(from, from + Duration::days(1), None, 50, 0))?.0);
        t.board.push(time_ms(|| tx.board(day))?.0);
        let cq = CounterQuery {
            day,
            states: vec!["uncertain".into(), "review".into()],
            reason: None,
        };
        t.counter.push(time_ms(|| tx.counter_rows(&cq, 50, 0))?.0);
        let id = (crate::mix(k) % self.intentions.max(1) as u64) as i64 + 1;
        let (ms, row) = time_ms(|| tx.intention(id))?;
        t.point.push(ms);
        t.detail.push(time_ms(|| tx.intention_detail(&row.key))?.0);
        self.searches(tx, k, &mut t.search)
    }

    /// Every search form of sample `k`, each for a patient of its own,
    /// timed on both searched screens into `into[form]` (Atención) and
    /// `into[forms + form]` (Próximas citas, 90 days).
    fn searches(&self, tx: &Tx<'_>, k: u64, into: &mut [Vec<f64>]) -> Result<(), StoreError> {
        let forms = SEARCH_FORMS.len();
        for f in 0..forms {
            let seed = k * forms as u64 + f as u64;
            let contact = crate::mix(seed ^ 0x5eed) % self.contacts + 1;
            let cid = crate::mix(seed ^ 0xc1d) % self.commitments + 1;
            let text = search_forms(contact, cid)[f].clone();
            let mut q = AttentionQuery::new(self.now);
            q.filter = Some(text.clone());
            into[f].push(time_ms(|| tx.attention(&q))?.0);
            let from = self.now - Duration::days(60);
            into[forms + f].push(time_ms(|| tx.upcoming(from, from + Duration::days(90), Some(&text), 50, 0))?.0);
        }
        Ok(())
    }
}

/// The search figures of one timed pass, named by screen, form and pass.
fn search_rows(v: Vec<Vec<f64>>, pass: &str) -> Vec<(String, f64, f64, usize)> {
    let forms = SEARCH_FORMS.len();
    v.into_iter()
        .enumerate()
        .map(|(i, v)| {
            let screen = if i < forms {
                "Atención"
            } else {
                "Próximas citas (90 days)"
            };
            summarize(&format!("search: {screen}, {} ({pass})", SEARCH_FORMS[i % forms]), v)
        })
        .collect()
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
