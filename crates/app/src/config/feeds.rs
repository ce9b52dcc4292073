//! `[[import.feed]]`: calendar feeds (`.ics` over HTTP) that `unavez serve`
//! polls. The feed's URL is a secret (Google's "secret address in iCal
//! format" keeps its token in the path), so the file names only the
//! environment variable that holds it; everything shown names the feed by
//! [`FeedConfig::name`] and [`origin`] (scheme and host).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The shortest poll interval: a feed is someone else's server.
pub const MIN_EVERY: Duration = Duration::from_secs(1);
/// The longest: beyond a day a feed is not "live".
pub const MAX_EVERY: Duration = Duration::from_secs(24 * 3600);

/// One `[[import.feed]]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedConfig {
    /// How the feed is named everywhere (logs, `/metrics`, the console,
    /// the ledger): letters, digits, `-`, `_` and `.`.
    pub name: String,
    /// The environment variable holding the whole URL (`https://…`).
    pub url_env: String,
    /// How often it is polled, as humantime text: `"30s"`, `"5m"`, `"1h"`.
    #[serde(default = "default_every")]
    pub every: String,
    /// Request headers whose values come from environment variables
    /// (`{ Authorization = "UNAVEZ_FEED_AUTH" }`).
    #[serde(default)]
    pub headers_env: BTreeMap<String, String>,
    /// How far ahead, in days, the feed is trusted to list every
    /// appointment: only events starting within it can vanish.
    #[serde(default = "default_window_days")]
    pub window_days: u32,
    /// More than this percentage of the window's upcoming events vanishing
    /// in one poll holds them in review instead of cancelling them.
    #[serde(default = "default_mass_pct")]
    pub mass_disappearance_pct: u32,
    /// The same, as a count.
    #[serde(default = "default_mass_max")]
    pub mass_disappearance_max: u32,
}

fn default_every() -> String {
    "5m".into()
}
fn default_window_days() -> u32 {
    60
}
fn default_mass_pct() -> u32 {
    20
}
fn default_mass_max() -> u32 {
    10
}

impl FeedConfig {
    /// The poll interval (validated at load).
    pub fn interval(&self) -> Duration {
        humantime::parse_duration(self.every.trim()).unwrap_or(Duration::from_secs(300))
    }

    /// The URL, read from `url_env` now.
    pub fn url(&self) -> Result<String, super::ConfigError> {
        super::secret_from_env(&self.url_env, &format!("import.feed[{}].url_env", self.name))
    }

    /// `(field, message)` of the first bad setting; `i` is the feed's
    /// position, for the message.
    pub fn validate(&self, i: usize) -> Result<(), (String, String)> {
        let at = |f: &str| format!("import.feed[{i}].{f}");
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 64
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !name_ok {
            return Err((
                at("name"),
                format!(
                    "{:?}: a feed's name is 1 to 64 letters, digits, '-', '_' or '.'",
                    self.name
                ),
            ));
        }
        if !is_env_name(&self.url_env) {
            return Err((
                at("url_env"),
                format!(
                    "{:?} is not an environment variable name: the URL itself goes in the environment, never in the file",
                    self.url_env
                ),
            ));
        }
        match humantime::parse_duration(self.every.trim()) {
            Ok(d) if (MIN_EVERY..=MAX_EVERY).contains(&d) => {}
            Ok(_) => {
                return Err((at("every"), format!("{:?}: must be between 1s and 24h", self.every)));
            }
            Err(e) => {
                return Err((
                    at("every"),
                    format!("{:?}: {e} (expected e.g. \"30s\", \"5m\", \"1h\")", self.every),
                ));
            }
        }
        for (header, var) in &self.headers_env {
            let valid_header = !header.is_empty()
                && header
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !valid_header {
                return Err((at("headers_env"), format!("{header:?} is not an HTTP header name")));
            }
            if !is_env_name(var) {
                return Err((
                    at("headers_env"),
                    format!("{header}: {var:?} is not an environment variable name"),
                ));
            }
        }
        if !(1..=731).contains(&self.window_days) {
            return Err((
                at("window_days"),
                format!("must be between 1 and 731 days, got {}", self.window_days),
            ));
        }
        if self.mass_disappearance_pct > 100 {
            return Err((
                at("mass_disappearance_pct"),
                format!("a percentage (0–100), got {}", self.mass_disappearance_pct),
            ));
        }
        Ok(())
    }
}

fn is_env_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Every feed valid, and no two with one name.
pub fn validate_all(feeds: &[FeedConfig]) -> Result<(), (String, String)> {
    let mut names = std::collections::HashSet::new();
    for (i, f) in feeds.iter().enumerate() {
        f.validate(i)?;
        if !names.insert(f.name.as_str()) {
            return Err((
                format!("import.feed[{i}].name"),
                format!("feed {:?} is defined twice", f.name),
            ));
        }
    }
    Ok(())
}

/// What of a URL may be shown: its scheme and host (and a port that is
/// not the scheme's default), never its path, query or user. Anything that
/// does not parse shows as `"(invalid URL)"`.
pub fn origin(url: &str) -> String {
    match reqwest::Url::parse(url.trim()) {
        Ok(u) => match (u.host_str(), u.port()) {
            (Some(h), Some(p)) => format!("{}://{h}:{p}", u.scheme()),
            (Some(h), None) => format!("{}://{h}", u.scheme()),
            (None, _) => format!("{}:", u.scheme()),
        },
        Err(_) => "(invalid URL)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use std::path::Path;

    fn parse(feed: &str) -> Result<Config, String> {
        Config::parse(&format!("[[import.feed]]\n{feed}\n"), Path::new("c.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn a_feed_is_read_with_its_defaults() {
        let cfg = parse("name = \"agenda\"\nurl_env = \"UNAVEZ_FEED\"").unwrap();
        let f = &cfg.import.feed[0];
        assert_eq!(f.interval(), Duration::from_secs(300));
        assert_eq!(
            (f.window_days, f.mass_disappearance_pct, f.mass_disappearance_max),
            (60, 20, 10)
        );
        let cfg = parse(
            "name = \"a\"\nurl_env = \"U\"\nevery = \"2s\"\nheaders_env = { Authorization = \"U_AUTH\" }\nwindow_days = 30",
        )
        .unwrap();
        assert_eq!(cfg.import.feed[0].interval(), Duration::from_secs(2));
        assert_eq!(cfg.import.feed[0].headers_env["Authorization"], "U_AUTH");
    }

    #[test]
    fn bad_feeds_are_refused_naming_the_field() {
        for (bad, want) in [
            ("name = \"a b\"\nurl_env = \"U\"", "import.feed[0].name"),
            (
                "name = \"a\"\nurl_env = \"https://x.test/secret\"",
                "import.feed[0].url_env",
            ),
            (
                "name = \"a\"\nurl_env = \"U\"\nevery = \"soon\"",
                "import.feed[0].every",
            ),
            ("name = \"a\"\nurl_env = \"U\"\nevery = \"100ms\"", "between 1s and 24h"),
            (
                "name = \"a\"\nurl_env = \"U\"\nwindow_days = 0",
                "import.feed[0].window_days",
            ),
            (
                "name = \"a\"\nurl_env = \"U\"\nmass_disappearance_pct = 120",
                "mass_disappearance_pct",
            ),
            (
                "name = \"a\"\nurl_env = \"U\"\nheaders_env = { \"Bad Header\" = \"X\" }",
                "headers_env",
            ),
            ("name = \"a\"\nurl = \"https://x\"", "url"),
            (
                "name = \"a\"\nurl_env = \"U\"\n[[import.feed]]\nname = \"a\"\nurl_env = \"V\"",
                "defined twice",
            ),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }

    #[test]
    fn only_scheme_and_host_are_shown() {
        assert_eq!(
            origin("https://calendar.google.com/calendar/ical/x%40group/private-abc123/basic.ics"),
            "https://calendar.google.com"
        );
        assert_eq!(
            origin("http://127.0.0.1:8123/f.ics?token=s3cret"),
            "http://127.0.0.1:8123"
        );
        assert_eq!(origin("https://user:pw@h.test/x"), "https://h.test");
        assert_eq!(origin("not a url"), "(invalid URL)");
    }
}
