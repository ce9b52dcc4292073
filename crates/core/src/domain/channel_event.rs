//! What became of a stored channel event (a status webhook, an inbound
//! message, an engine event): `channel_events.status`. The ledger's
//! queries select by these words through fragments built from
//! [`EventStatus`] (`unavez_ledger::rules_sql`), and the console shows the
//! technicians' cases by an exhaustive match on it.

use std::fmt;

use serde::Serialize;

/// The processing status of one stored channel event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventStatus {
    /// Stored, not processed yet (the first status of every row).
    Received,
    /// Applied to its intention.
    Applied,
    /// A status for an intention not found yet: waits for it.
    Pending,
    /// Its intention no longer takes it (nothing to apply).
    Ignored,
    /// Kept as a fact with nothing to apply (an inbound message, a
    /// template notice).
    Recorded,
    /// Applied to nothing: a technician must read why (its reason).
    Parked,
    /// Refused (another installation's event, a bad signature).
    Refused,
}

impl EventStatus {
    pub const ALL: [EventStatus; 7] = [
        Self::Received,
        Self::Applied,
        Self::Pending,
        Self::Ignored,
        Self::Recorded,
        Self::Parked,
        Self::Refused,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Received => "received",
            Self::Applied => "applied",
            Self::Pending => "pending",
            Self::Ignored => "ignored",
            Self::Recorded => "recorded",
            Self::Parked => "parked",
            Self::Refused => "refused",
        }
    }

    pub fn parse(s: &str) -> Option<EventStatus> {
        Self::ALL.into_iter().find(|e| e.as_str() == s)
    }

    /// A technician's case in Atención: kept, applied to nothing, and
    /// nobody else will look at it.
    pub fn is_technicians_case(self) -> bool {
        matches!(self, Self::Parked | Self::Refused)
    }
}

impl fmt::Display for EventStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_reads_back_from_its_word() {
        for s in EventStatus::ALL {
            assert_eq!(EventStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(EventStatus::parse("stuck"), None);
    }
}
