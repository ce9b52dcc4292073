//! The reconciler's choice for one uncertain intention: ask the channel
//! where the command is, repeat the request with the same key, wait for the
//! channel's own evidence, or hand it to a person. Decided from what the
//! channel can prove (its capabilities), the last attempt and the policy.
//! The app reads the facts and acts on the [`Step`]; the model checker
//! (crates/model) calls the same rule.

use chrono::{DateTime, Duration, Utc};

/// What the choice reads of one uncertain intention and its channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// The channel deduplicates by our key: repeating a send is safe.
    pub idempotent_keys: bool,
    /// The channel can be asked for a command's current state.
    pub command_lookup: bool,
    /// An earlier answer gave us the channel's command id.
    pub command_known: bool,
    /// The last attempt's outcome is `ambiguous` (the engine itself does not
    /// know whether the message left).
    pub ambiguous: bool,
    /// When the outcome became unknown.
    pub since: DateTime<Utc>,
    /// Reconciliation tries that settled nothing so far.
    pub tries: u32,
}

/// The policy the choice applies (`[policy]` in the configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How long a channel that can neither be asked nor safely repeated (or
    /// an ambiguous command) is waited for before a person reviews it.
    pub uncertain_review: Duration,
    /// Tries on an idempotent channel before a person reviews it.
    pub max_tries: u32,
}

/// What to do with one uncertain intention.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// To a person, with the reason they see.
    Review(String),
    /// Ask the channel where the known command is.
    Lookup,
    /// Send again with the same key (validity decides first: the repeat may
    /// be the first delivery).
    Repeat,
    /// Nothing to do now but wait for the channel's evidence; why.
    Wait(String),
}

/// The choice. An ambiguous command is never repeated, and a channel
/// without idempotency keys is never resent: both wait for evidence, and a
/// person after `uncertain_review`. An idempotent channel is asked (a
/// lookup needs the command id from an earlier answer) or repeated with
/// the same key, at most `max_tries` times.
pub fn decide(f: &Facts, limits: &Limits, now: DateTime<Utc>) -> Step {
    let waited = now - f.since;
    if (!f.idempotent_keys || f.ambiguous) && waited >= limits.uncertain_review {
        return Step::Review(format!(
            "no evidence {} minute(s) after the outcome became unknown{}",
            waited.num_minutes(),
            if f.ambiguous {
                " (engine: ambiguous)"
            } else {
                " (channel cannot be asked or safely repeated)"
            }
        ));
    }
    if f.idempotent_keys && f.tries >= limits.max_tries {
        return Step::Review(format!("{} reconciliation tries without evidence", f.tries));
    }
    // Lookup needs the command id from an earlier answer. Without one, an
    // idempotent channel is asked by repeating the request with the same
    // key, which is recorded as an attempt because it may be the one that
    // actually goes out (the first may never have arrived).
    if f.command_lookup && f.command_known {
        return Step::Lookup;
    }
    if f.ambiguous {
        return Step::Wait("engine reports the command as ambiguous: waiting for its own resolution".into());
    }
    if f.idempotent_keys {
        return Step::Repeat;
    }
    Step::Wait("channel has no idempotency key: waiting for a status webhook, never resending".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_795_878_000, 0).unwrap()
    }

    const LIMITS: Limits = Limits {
        uncertain_review: Duration::minutes(30),
        max_tries: 20,
    };

    /// The rule restated as a table, independently of `decide`'s order of
    /// tests: (review, lookup, repeat); everything else waits.
    fn expected(f: &Facts, waited: Duration) -> &'static str {
        let review_window = (!f.idempotent_keys || f.ambiguous) && waited >= LIMITS.uncertain_review;
        let out_of_tries = f.idempotent_keys && f.tries >= LIMITS.max_tries;
        if review_window || out_of_tries {
            "review"
        } else if f.command_lookup && f.command_known {
            "lookup"
        } else if f.idempotent_keys && !f.ambiguous {
            "repeat"
        } else {
            "wait"
        }
    }

    fn kind(s: &Step) -> &'static str {
        match s {
            Step::Review(_) => "review",
            Step::Lookup => "lookup",
            Step::Repeat => "repeat",
            Step::Wait(_) => "wait",
        }
    }

    /// Every combination of capabilities, command id, ambiguity, time
    /// waited (before, at and after the window) and tries (before, at and
    /// after the limit).
    #[test]
    fn every_combination_follows_the_rule() {
        let bools = [false, true];
        let mut seen = std::collections::HashSet::new();
        for idempotent_keys in bools {
            for command_lookup in bools {
                for command_known in bools {
                    for ambiguous in bools {
                        for minutes in [0, 29, 30, 31, 600] {
                            for tries in [0, 19, 20, 21] {
                                let waited = Duration::minutes(minutes);
                                let f = Facts {
                                    idempotent_keys,
                                    command_lookup,
                                    command_known,
                                    ambiguous,
                                    since: now() - waited,
                                    tries,
                                };
                                let step = decide(&f, &LIMITS, now());
                                assert_eq!(kind(&step), expected(&f, waited), "{f:?}");
                                seen.insert(kind(&step));
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(seen.len(), 4, "every step is reachable");
    }

    /// The safety the rule exists for: an ambiguous command and a channel
    /// without idempotency keys are never repeated, whatever else holds.
    #[test]
    fn never_a_repeat_that_could_duplicate() {
        for command_lookup in [false, true] {
            for command_known in [false, true] {
                for (idempotent_keys, ambiguous) in [(false, false), (false, true), (true, true)] {
                    for minutes in [0, 30, 600] {
                        let f = Facts {
                            idempotent_keys,
                            command_lookup,
                            command_known,
                            ambiguous,
                            since: now() - Duration::minutes(minutes),
                            tries: 0,
                        };
                        assert_ne!(decide(&f, &LIMITS, now()), Step::Repeat, "{f:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_reasons_a_person_sees() {
        let f = Facts {
            idempotent_keys: false,
            command_lookup: false,
            command_known: false,
            ambiguous: false,
            since: now() - Duration::minutes(45),
            tries: 0,
        };
        assert_eq!(
            decide(&f, &LIMITS, now()),
            Step::Review(
                "no evidence 45 minute(s) after the outcome became unknown (channel cannot be asked or safely \
                 repeated)"
                    .into()
            )
        );
        let engine = Facts {
            idempotent_keys: true,
            command_lookup: true,
            tries: 20,
            since: now(),
            ..f
        };
        assert_eq!(
            decide(&engine, &LIMITS, now()),
            Step::Review("20 reconciliation tries without evidence".into())
        );
        // …but time alone does not send an idempotent timeout to review.
        let waited = Facts {
            tries: 3,
            since: now() - Duration::minutes(300),
            ..engine
        };
        assert_eq!(decide(&waited, &LIMITS, now()), Step::Repeat);
    }
}
