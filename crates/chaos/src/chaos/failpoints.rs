//! The harness's failpoint specs, and arming them in a child with
//! `fail::cfg` (the points themselves are `unavez_ledger::failpoint`,
//! compiled in because this crate enables the `failpoints` feature).
//!
//! A spec is a comma-separated list of `name:N[:action[:times]]`:
//!
//! - `after_claim:3` — abort the process (like a SIGKILL: no destructors, no
//!   flushing) the 3rd time the dispatcher passes `after_claim`;
//! - `store_commit:40:error` — the 40th commit fails with an injected I/O
//!   error instead of committing (the transaction is rolled back);
//! - `store_begin:10:busy:5` — the 10th to 14th transactions fail to begin
//!   with `SQLITE_BUSY`, as if another process held the write lock past the
//!   busy timeout;
//! - `before_send:1:sleep=3000` — the 1st claimed message waits 3 s between
//!   its claim and the pre-send check (only the dispatcher's async points
//!   honour `sleep`).
//!
//! Each point becomes one `fail` action chain: `name:N:busy:T` is
//! `{N-1}*off->{T}*return(busy)->off`.

use std::collections::BTreeMap;

/// The action words the points understand (`unavez_ledger::failpoint`).
const ACTIONS: &[&str] = &["abort", "error", "busy"];

/// One parsed entry: point name, first hit (1-based), action word, hits.
pub type Entry = (String, u64, String, u64);

/// Parses a spec; malformed entries are reported so a typo never silently
/// disarms a crash test.
pub fn parse(spec: &str) -> Result<Vec<Entry>, String> {
    let mut out = Vec::new();
    for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let parts: Vec<&str> = entry.split(':').collect();
        let bad = || format!("failpoints: bad entry {entry:?} (expected name:N[:abort|error|busy|sleep=MS[:times]])");
        if parts.len() < 2 || parts.len() > 4 || parts[0].is_empty() {
            return Err(bad());
        }
        let at: u64 = parts[1].parse().map_err(|_| bad())?;
        if at == 0 {
            return Err(bad());
        }
        let action = parts.get(2).copied().unwrap_or("abort");
        let sleep_ok = action
            .strip_prefix("sleep=")
            .is_some_and(|ms| ms.parse::<u64>().is_ok());
        if !ACTIONS.contains(&action) && !sleep_ok {
            return Err(bad());
        }
        let times: u64 = match parts.get(3) {
            Some(t) => t.parse().map_err(|_| bad())?,
            None => 1,
        };
        out.push((parts[0].to_string(), at, action.to_string(), times.max(1)));
    }
    Ok(out)
}

/// The `fail` action chain of each point named in `entries` (entries for
/// one name are merged in hit order; an overlap keeps the earlier one).
pub fn chains(entries: &[Entry]) -> BTreeMap<String, String> {
    let mut by_name: BTreeMap<String, Vec<&Entry>> = BTreeMap::new();
    for e in entries {
        by_name.entry(e.0.clone()).or_default().push(e);
    }
    by_name
        .into_iter()
        .map(|(name, mut es)| {
            es.sort_by_key(|e| e.1);
            let mut steps = Vec::new();
            let mut next = 1;
            for (_, at, action, times) in es {
                if *at < next {
                    continue;
                }
                if *at > next {
                    steps.push(format!("{}*off", at - next));
                }
                steps.push(format!("{times}*return({action})"));
                next = at + times;
            }
            steps.push("off".into());
            (name, steps.join("->"))
        })
        .collect()
}

/// Arms every point of `spec` in this process.
pub fn arm(spec: &str) -> Result<(), String> {
    for (name, chain) in chains(&parse(spec)?) {
        fail::cfg(&name, &chain).map_err(|e| format!("failpoint {name} ({chain}): {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms() {
        let v = parse("after_claim:3, store_commit:40:error,store_begin:10:busy:5,before_send:1:sleep=250").unwrap();
        assert_eq!(v[0], ("after_claim".into(), 3, "abort".into(), 1));
        assert_eq!(v[1], ("store_commit".into(), 40, "error".into(), 1));
        assert_eq!(v[2], ("store_begin".into(), 10, "busy".into(), 5));
        assert_eq!(v[3], ("before_send".into(), 1, "sleep=250".into(), 1));
        assert!(parse("").unwrap().is_empty());
    }

    #[test]
    fn rejects_malformed_entries() {
        for bad in [
            "after_claim",
            "after_claim:x",
            "after_claim:0",
            ":3",
            "a:1:explode",
            "a:1:error:x",
            "a:1:b:2:3",
            "a:1:sleep",
            "a:1:sleep=x",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn entries_become_fail_chains() {
        let c = chains(&parse("store_begin:10:busy:3,after_claim:1,store_begin:20:error").unwrap());
        assert_eq!(c["after_claim"], "1*return(abort)->off");
        assert_eq!(c["store_begin"], "9*off->3*return(busy)->7*off->1*return(error)->off");
    }

    #[test]
    fn an_armed_point_fires_at_its_hit_and_only_then() {
        arm("chaos_selftest:2:error:2").unwrap();
        let fired: Vec<bool> = (0..5).map(|_| fail::eval("chaos_selftest", |a| a).is_some()).collect();
        assert_eq!(fired, [false, true, true, false, false]);
        fail::remove("chaos_selftest");
    }
}
