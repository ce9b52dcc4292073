//! Calendar feeds polled by `unavez serve` (`[[import.feed]]`).
//!
//! Each feed has a task of its own: take the feed's lease (one `serve` per
//! shared ledger polls it at a time; another takes it over when it lapses),
//! GET it conditionally ([`fetch`]), and hand a 2xx body to [`apply`],
//! which runs it through `unavez import`'s `.ics` path and decides what
//! vanished (`domain::feed`). A 304 writes only the feed's status row. A
//! failure writes only its reason there; nothing is cancelled.
//!
//! The URL is a secret: it is read from the environment once at start and
//! lives in the task only. Logs and the ledger name the feed by its name
//! and its origin (scheme and host).

pub mod apply;
pub mod fetch;

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub(crate) use apply::cancel_vanished;
pub use apply::{FeedEnv, FeedError, PollOutcome, PollReport, VANISHED_REASON, apply_body, record_failure};
use fetch::Fetched;

use crate::config::feeds::origin;
use crate::config::{Config, FeedConfig, secret_from_env};
use crate::ledger::Ledger;
use crate::planner::Planner;
use crate::templates::Templates;

/// A feed ready to poll: its settings, URL and headers read from the
/// environment.
struct Ready {
    feed: FeedConfig,
    url: String,
    origin: String,
    headers: reqwest::header::HeaderMap,
}

/// Reads each feed's URL and headers from the environment: a missing one
/// fails the start, naming the variable (never its value).
fn ready(feeds: &[FeedConfig]) -> Result<Vec<Ready>, FeedError> {
    feeds
        .iter()
        .map(|f| {
            let url = f.url().map_err(|e| FeedError::Config(e.to_string()))?;
            let origin = origin(&url);
            if !matches!(
                reqwest::Url::parse(url.trim())
                    .map(|u| u.scheme().to_string())
                    .as_deref(),
                Ok("http" | "https")
            ) {
                return Err(FeedError::Config(format!(
                    "feed {}: {} does not hold an http(s) URL (it shows as {origin})",
                    f.name, f.url_env
                )));
            }
            let mut pairs = Vec::new();
            for (header, var) in &f.headers_env {
                let v = secret_from_env(var, &format!("import.feed[{}].headers_env.{header}", f.name))
                    .map_err(|e| FeedError::Config(e.to_string()))?;
                pairs.push((header.clone(), v));
            }
            let headers = fetch::headers(&pairs).map_err(|e| FeedError::Config(format!("feed {}: {e}", f.name)))?;
            Ok(Ready {
                feed: f.clone(),
                url: url.trim().to_string(),
                origin,
                headers,
            })
        })
        .collect()
}

/// What every feed task shares.
struct Shared {
    ledger: Ledger,
    config: Config,
    templates: Templates,
    client: reqwest::Client,
    /// Who holds the leases (the `serve` run's owner id).
    owner: String,
}

/// The running feed tasks; [`Feeds::stop`] ends them and gives their
/// leases up.
pub struct Feeds {
    stop: CancellationToken,
    tracker: TaskTracker,
    names: Vec<String>,
}

impl Feeds {
    /// Starts one task per `[[import.feed]]` on the current runtime.
    pub fn start(ledger: &Ledger, config: &Config, templates: &Templates, owner: &str) -> Result<Feeds, FeedError> {
        let ready = ready(&config.import.feed)?;
        let client = fetch::client().map_err(FeedError::Config)?;
        let shared = Arc::new(Shared {
            ledger: ledger.clone(),
            config: config.clone(),
            templates: templates.clone(),
            client,
            owner: owner.to_string(),
        });
        let stop = CancellationToken::new();
        let tracker = TaskTracker::new();
        let names = ready.iter().map(|r| r.feed.name.clone()).collect();
        for r in ready {
            tracing::info!(
                "feed {}: polling {} every {}",
                r.feed.name,
                r.origin,
                r.feed.every.trim()
            );
            tracker.spawn(run(shared.clone(), r, stop.clone()));
        }
        tracker.close();
        Ok(Feeds { stop, tracker, names })
    }

    /// The feeds' names.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Stops every task (a poll in flight finishes its transaction or is
    /// dropped before it writes) and gives the leases up.
    pub async fn stop(self) {
        self.stop.cancel();
        self.tracker.wait().await;
    }
}

/// How long a lease lasts: three polls, and at least half a minute, so a
/// slow poll never loses it and a dead `serve`'s feed is taken over soon.
fn lease_length(every: Duration) -> chrono::Duration {
    let ms = (every.as_millis() as i64).saturating_mul(3).max(30_000);
    chrono::Duration::milliseconds(ms)
}

async fn run(shared: Arc<Shared>, r: Ready, stop: CancellationToken) {
    let every = r.feed.interval();
    loop {
        match poll_once(&shared, &r).await {
            Ok(Some(outcome)) => log_outcome(&r, &outcome),
            Ok(None) => tracing::debug!("feed {}: another serve holds its lease", r.feed.name),
            Err(e) => tracing::error!("feed {}: {e}", r.feed.name),
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(every) => {}
        }
    }
    let (name, owner) = (r.feed.name.clone(), shared.owner.clone());
    let released = shared
        .ledger
        .call(move |s| s.write(|tx| tx.feed_release_lease(&name, &owner)))
        .await;
    if let Ok(Err(e)) | Err(e) = released {
        tracing::warn!("feed {}: could not give its lease up: {e}", r.feed.name);
    }
}

fn log_outcome(r: &Ready, o: &PollOutcome) {
    let name = &r.feed.name;
    match o {
        PollOutcome::Unchanged => tracing::debug!("feed {name}: unchanged (304)"),
        PollOutcome::LeaseLost => tracing::info!("feed {name}: another serve took it over; its poll was dropped"),
        PollOutcome::Untrusted { reason } => tracing::warn!("feed {name} ({}): {reason}", r.origin),
        PollOutcome::Applied(p) => {
            if !p.held.is_empty() {
                tracing::warn!(
                    "feed {name}: el calendario perdió {} citas de golpe (of {} upcoming): held for review; \
                     `unavez feeds confirm {name}` cancels them, `unavez feeds discard {name}` keeps them",
                    p.held.len(),
                    p.held_of
                );
            }
            tracing::info!(
                "feed {name}: {} VEVENT(s), {} applied, {} refused, {} cancelled (vanished), {} released",
                p.vevents,
                p.applied,
                p.refused,
                p.cancelled.len(),
                p.released.len()
            );
        }
    }
}

/// One poll, if this `serve` holds (or takes) the feed's lease.
async fn poll_once(shared: &Arc<Shared>, r: &Ready) -> Result<Option<PollOutcome>, FeedError> {
    let now = Utc::now();
    let (name, origin, owner) = (r.feed.name.clone(), r.origin.clone(), shared.owner.clone());
    let until = now + lease_length(r.feed.interval());
    let status = shared
        .ledger
        .call(move |s| {
            s.write(|tx| {
                if !tx.feed_lease(&name, &origin, &owner, until, now)? {
                    return Ok(None);
                }
                tx.feed(&name)
            })
        })
        .await??;
    let Some(status) = status else {
        return Ok(None);
    };
    let fetched = fetch::fetch(
        &shared.client,
        &r.url,
        &r.headers,
        status.etag.as_deref(),
        status.last_modified.as_deref(),
    )
    .await;
    let now = Utc::now();
    let shared2 = shared.clone();
    let feed = r.feed.clone();
    let (origin, owner) = (r.origin.clone(), shared.owner.clone());
    let until = now + lease_length(r.feed.interval());
    let outcome = shared
        .ledger
        .call(move |store| -> Result<PollOutcome, FeedError> {
            let name = feed.name.as_str();
            match fetched {
                Fetched::NotModified => {
                    store.write(|tx| tx.feed_unchanged(name, now))?;
                    Ok(PollOutcome::Unchanged)
                }
                Fetched::Status(code) => failed(store, name, &format!("HTTP {code}: nothing cancelled"), now),
                Fetched::Failed(why) => failed(store, name, &format!("{why}: nothing cancelled"), now),
                Fetched::Body {
                    bytes,
                    etag,
                    last_modified,
                } => {
                    let cfg = &shared2.config;
                    let planner = Planner::new(&cfg.policy, &shared2.templates, cfg.tz());
                    let env = FeedEnv {
                        feed: &feed,
                        planner: &planner,
                        calendar: &cfg.import,
                        lease: Some((&owner, &origin, until)),
                    };
                    apply_body(store, &env, &bytes, (etag.as_deref(), last_modified.as_deref()), now)
                }
            }
        })
        .await??;
    Ok(Some(outcome))
}

fn failed(
    store: &mut crate::store::Store,
    name: &str,
    reason: &str,
    now: chrono::DateTime<Utc>,
) -> Result<PollOutcome, FeedError> {
    record_failure(store, name, reason, now)?;
    Ok(PollOutcome::Untrusted {
        reason: reason.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_outlives_three_polls_and_half_a_minute() {
        assert_eq!(lease_length(Duration::from_secs(1)), chrono::Duration::seconds(30));
        assert_eq!(lease_length(Duration::from_secs(300)), chrono::Duration::seconds(900));
    }

    #[test]
    fn a_missing_url_names_its_variable_not_a_value() {
        let f = FeedConfig {
            name: "agenda".into(),
            url_env: "UNAVEZ_TEST_FEED_NEVER_SET_7".into(),
            every: "5m".into(),
            headers_env: Default::default(),
            window_days: 60,
            mass_disappearance_pct: 20,
            mass_disappearance_max: 10,
        };
        let e = ready(&[f]).err().expect("refused").to_string();
        assert!(e.contains("UNAVEZ_TEST_FEED_NEVER_SET_7"), "{e}");
    }
}
