//! Seeded fault injection for the engine simulator.
//!
//! Every decision is a pure function of `(seed, fault, scope, attempt)`, not
//! of timing or of the order requests happen to arrive in, so the same seed
//! and the same traffic produce the same faults on a loaded machine too.
//!
//! Grammar of `--faults` (comma-separated `name=value`, all optional):
//!
//! | name | value | effect |
//! |---|---|---|
//! | `latency_ms` | `A..B` or `N` | extra delay before each request is processed |
//! | `error5xx` | probability | 503 before processing: nothing stored |
//! | `reset` | probability | connection closed without a response, before processing |
//! | `timeout_after` | probability | processed and stored, but the response never comes |
//! | `rate429` | probability | 429; carries the stored command when the key is known |
//! | `ambiguous` | probability | the command turns `ambiguo` when it goes out, resolved later |
//! | `webhook_dup` | probability | a webhook event is delivered twice |
//! | `webhook_delay_ms` | `A..B` or `N` | delay before each webhook delivery |
//! | `webhook_reorder` | `true`/`false` | deliveries are independent, so later events may overtake |
//! | `hold_ms` | `N` | how long a `timeout_after` response is held before the connection drops (default 30000) |
//!
//! Probabilities are in `0..=1`. Example:
//! `timeout_after=0.3,error5xx=0.1,latency_ms=5..50,webhook_dup=0.3,webhook_reorder=true`.

use sha2::{Digest, Sha256};
use std::fmt;
use std::ops::RangeInclusive;

/// Parsed `--faults` specification. `Default` injects nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultSpec {
    pub latency_ms: RangeInclusive<u64>,
    pub error5xx: f64,
    pub reset: f64,
    pub timeout_after: f64,
    pub rate429: f64,
    pub ambiguous: f64,
    pub webhook_dup: f64,
    pub webhook_delay_ms: RangeInclusive<u64>,
    pub webhook_reorder: bool,
    /// How long a `timeout_after` response is held before the connection
    /// is dropped without an answer.
    pub hold_ms: u64,
}

impl Default for FaultSpec {
    fn default() -> Self {
        FaultSpec {
            latency_ms: 0..=0,
            error5xx: 0.0,
            reset: 0.0,
            timeout_after: 0.0,
            rate429: 0.0,
            ambiguous: 0.0,
            webhook_dup: 0.0,
            webhook_delay_ms: 0..=0,
            webhook_reorder: false,
            hold_ms: 30_000,
        }
    }
}

/// A `--faults` string that could not be understood.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("fault spec, item {item:?}: {reason}")]
pub struct FaultSpecError {
    pub item: String,
    pub reason: String,
}

impl FaultSpec {
    /// No faults at all.
    pub fn none() -> FaultSpec {
        FaultSpec::default()
    }

    /// Parses the grammar documented on this module. An empty string is no faults.
    pub fn parse(spec: &str) -> Result<FaultSpec, FaultSpecError> {
        let mut f = FaultSpec::default();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let err = |reason: &str| FaultSpecError {
                item: item.to_string(),
                reason: reason.to_string(),
            };
            let (name, value) = item.split_once('=').ok_or_else(|| err("expected name=value"))?;
            let (name, value) = (name.trim(), value.trim());
            match name {
                "latency_ms" => f.latency_ms = parse_range(value).map_err(|r| err(&r))?,
                "webhook_delay_ms" => f.webhook_delay_ms = parse_range(value).map_err(|r| err(&r))?,
                "error5xx" => f.error5xx = parse_prob(value).map_err(|r| err(&r))?,
                "reset" => f.reset = parse_prob(value).map_err(|r| err(&r))?,
                "timeout_after" => f.timeout_after = parse_prob(value).map_err(|r| err(&r))?,
                "rate429" => f.rate429 = parse_prob(value).map_err(|r| err(&r))?,
                "ambiguous" => f.ambiguous = parse_prob(value).map_err(|r| err(&r))?,
                "webhook_dup" => f.webhook_dup = parse_prob(value).map_err(|r| err(&r))?,
                "webhook_reorder" => {
                    f.webhook_reorder = match value {
                        "true" | "1" | "yes" => true,
                        "false" | "0" | "no" => false,
                        _ => return Err(err("expected true or false")),
                    }
                }
                "hold_ms" => f.hold_ms = value.parse().map_err(|_| err("expected milliseconds"))?,
                _ => return Err(err("unknown fault name (see docs/reference/simulator.md)")),
            }
        }
        Ok(f)
    }
}

impl fmt::Display for FaultSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "latency_ms={}..{},error5xx={},reset={},timeout_after={},rate429={},ambiguous={},webhook_dup={},webhook_delay_ms={}..{},webhook_reorder={},hold_ms={}",
            self.latency_ms.start(),
            self.latency_ms.end(),
            self.error5xx,
            self.reset,
            self.timeout_after,
            self.rate429,
            self.ambiguous,
            self.webhook_dup,
            self.webhook_delay_ms.start(),
            self.webhook_delay_ms.end(),
            self.webhook_reorder,
            self.hold_ms
        )
    }
}

fn parse_prob(v: &str) -> Result<f64, String> {
    let p: f64 = v
        .parse()
        .map_err(|_| "expected a probability such as 0.3".to_string())?;
    if !(0.0..=1.0).contains(&p) {
        return Err("probability must be between 0 and 1".into());
    }
    Ok(p)
}

fn parse_range(v: &str) -> Result<RangeInclusive<u64>, String> {
    let bad = || "expected milliseconds N or a range A..B".to_string();
    match v.split_once("..") {
        Some((a, b)) => {
            let (a, b): (u64, u64) = (
                a.trim().parse().map_err(|_| bad())?,
                b.trim().parse().map_err(|_| bad())?,
            );
            if a > b {
                return Err("range start is after its end".into());
            }
            Ok(a..=b)
        }
        None => {
            let n: u64 = v.parse().map_err(|_| bad())?;
            Ok(n..=n)
        }
    }
}

/// Deterministic dice: a hash of the seed and the decision's identity.
#[derive(Debug, Clone, Copy)]
pub struct Dice {
    pub seed: u64,
}

impl Dice {
    /// A number in `[0, 1)` fixed by `(seed, parts)`.
    pub fn unit(&self, parts: &[&str]) -> f64 {
        (self.raw(parts) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`, fixed by `(seed, parts)`.
    pub fn chance(&self, p: f64, parts: &[&str]) -> bool {
        p > 0.0 && self.unit(parts) < p
    }

    /// A value in the inclusive range, fixed by `(seed, parts)`.
    pub fn pick(&self, range: &RangeInclusive<u64>, parts: &[&str]) -> u64 {
        let (a, b) = (*range.start(), *range.end());
        if a >= b {
            return a;
        }
        a + self.raw(parts) % (b - a + 1)
    }

    /// Raw 64 bits; also used for stable identifiers.
    pub fn raw(&self, parts: &[&str]) -> u64 {
        let mut h = Sha256::new();
        h.update(self.seed.to_le_bytes());
        for p in parts {
            // Length prefix so ("ab","c") and ("a","bc") differ.
            h.update((p.len() as u64).to_le_bytes());
            h.update(p.as_bytes());
        }
        let d = h.finalize();
        let mut b = [0u8; 8];
        b.copy_from_slice(&d[..8]);
        u64::from_le_bytes(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example() {
        let f = FaultSpec::parse(
            "timeout_after=0.3,error5xx=0.1,reset=0.05,rate429=0.05,latency_ms=5..50,webhook_dup=0.3,webhook_delay_ms=0..500,webhook_reorder=true,ambiguous=0.02",
        )
        .unwrap();
        assert_eq!(f.timeout_after, 0.3);
        assert_eq!(f.latency_ms, 5..=50);
        assert_eq!(f.webhook_delay_ms, 0..=500);
        assert!(f.webhook_reorder);
        assert_eq!(f.ambiguous, 0.02);
        assert_eq!(FaultSpec::parse("").unwrap(), FaultSpec::none());
        assert_eq!(FaultSpec::parse("latency_ms=7").unwrap().latency_ms, 7..=7);
        // Display round-trips.
        assert_eq!(FaultSpec::parse(&f.to_string()).unwrap(), f);
    }

    #[test]
    fn bad_specs_name_the_item() {
        for (spec, item) in [
            ("error5xx=2", "error5xx=2"),
            ("reset", "reset"),
            ("nope=1", "nope=1"),
            ("latency_ms=9..3", "latency_ms=9..3"),
            ("webhook_reorder=maybe", "webhook_reorder=maybe"),
            ("rate429=x", "rate429=x"),
        ] {
            let e = FaultSpec::parse(spec).unwrap_err();
            assert_eq!(e.item, item);
            assert!(e.to_string().contains(item));
        }
    }

    #[test]
    fn dice_are_deterministic_and_spread() {
        let d = Dice { seed: 7 };
        assert_eq!(d.unit(&["a", "1"]), d.unit(&["a", "1"]));
        assert_ne!(d.unit(&["a", "1"]), Dice { seed: 8 }.unit(&["a", "1"]));
        assert_ne!(d.raw(&["ab", "c"]), d.raw(&["a", "bc"]));
        let hits = (0..10_000).filter(|i| d.chance(0.3, &["x", &i.to_string()])).count();
        assert!((2_700..3_300).contains(&hits), "{hits}");
        assert!(!d.chance(0.0, &["x"]));
        assert!((0..100).all(|i| d.chance(1.0, &["y", &i.to_string()])));
        for i in 0..100 {
            assert!((5..=50).contains(&d.pick(&(5..=50), &[&i.to_string()])));
        }
    }
}
