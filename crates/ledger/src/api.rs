//! The set-based ledger surface: what the dispatcher and the planner need
//! from a ledger, as rows in and rows out. [`LedgerTx`] is what a second
//! backend (PostgreSQL, issue 13) implements; the SQLite [`Tx`] implements
//! it here by delegating to its typed operations.
//!
//! Rules never live behind this trait: the rows a method returns are facts
//! (what is stored), the rows it takes are decisions already made by
//! `unavez-core` and `unavez-app` (which state change, which history row,
//! which next try). A backend only has to store them faithfully, inside
//! the caller's transaction, in the order given.

use chrono::{DateTime, Utc};

use crate::domain::counter::Counter;
use crate::domain::finish::{AttemptWrite, FinishFacts, SequenceFacts};
use crate::domain::history::{Record, Said};
use crate::domain::intention::NewIntention;
use crate::domain::state::IntentionState;
use crate::domain::status::Report;
use crate::domain::validity::CommitmentFacts;
use crate::store::{ContactRow, IntentionRow, PendingStatus, Result, Tx};

/// An intention's channel references: `(id, command id, message id)`.
pub type ChannelRefs = (i64, Option<String>, Option<String>);

/// Which planned intentions a claim may take.
#[derive(Debug, Clone)]
pub enum ClaimScope {
    /// Everything due (the background loop).
    Due,
    /// Only these ids, and only if they are due (reprocessing a day).
    Ids(Vec<i64>),
}

/// Everything validity and the claim decision read about one intention, in
/// one set-based read.
#[derive(Debug, Clone)]
pub struct ClaimFacts {
    pub intention: IntentionRow,
    pub commitment: CommitmentFacts,
    pub contact: Option<ContactRow>,
    /// An earlier attempt was acknowledged by the channel.
    pub acknowledged: bool,
    /// Other intentions to the same recipient with an attempt that may have
    /// reached the channel since the day start asked for (0 when none was).
    pub sent_today: u32,
    /// This intention itself has such an attempt since that day start.
    pub counted_today: bool,
}

/// A new attempt row, written before the channel is contacted.
#[derive(Debug, Clone)]
pub struct NewAttempt {
    pub intention_id: i64,
    /// The attempt number; the intention's `attempt_count` becomes `n`.
    pub n: i64,
    pub worker: String,
    pub channel: String,
    /// The commitment version the validity check of this attempt read.
    pub version_checked: i64,
    /// A claim's lease: `(owner, until)`; also clears `next_attempt_at`.
    pub lease: Option<(String, DateTime<Utc>)>,
    pub at: DateTime<Utc>,
}

/// A claim to write: the intention moves as `record` says (from
/// `planned`, only if it still is, to `dispatching`) under `attempt`'s
/// lease and number, `record` is its history row, and `attempt` is
/// written before the channel is contacted.
#[derive(Debug, Clone)]
pub struct NewClaim {
    pub record: Record,
    pub attempt: NewAttempt,
}

/// An intention to reserve: the new row unless its key exists.
#[derive(Debug, Clone)]
pub struct Reservation<'a> {
    pub intention: &'a NewIntention,
    pub fingerprint: &'a str,
    pub commitment_id: i64,
    pub contact_id: Option<i64>,
    /// The history row written with a new reservation.
    pub said: Said,
    pub at: DateTime<Utc>,
}

/// What reserving one key found: `inserted`, or the stored row whose
/// fingerprint the caller compares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReserveRow {
    pub id: i64,
    pub inserted: bool,
    pub fingerprint: String,
}

/// A still-planned intention of one commitment (what a closure may close).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedRow {
    pub id: i64,
    pub key: String,
    pub commitment_version: i64,
    pub purpose: String,
    pub asks_confirmation: bool,
}

/// The dispatcher's and planner's ledger, set-based. Every method runs in
/// the caller's transaction (`BEGIN IMMEDIATE` for writes).
pub trait LedgerTx {
    // --- reading ---
    /// The time to decide at: `caller` on an embedded ledger, the
    /// database's clock on a shared one (see `Tx::clock`).
    fn clock(&self, caller: DateTime<Utc>) -> Result<DateTime<Utc>>;
    /// One intention by id (an error when it does not exist).
    fn intention(&self, id: i64) -> Result<IntentionRow>;
    /// Ids of planned intentions due at `now` in `scope`, oldest due first,
    /// at most `limit`.
    fn due_ids(&self, scope: &ClaimScope, limit: u32, now: DateTime<Utc>) -> Result<Vec<i64>>;
    /// The claim facts of these intentions, in the order given (missing
    /// ids are absent). `day_start`: count the recipient's messages since
    /// then (`None`: no daily cap, nothing counted).
    fn claim_facts(&self, ids: &[i64], day_start: Option<DateTime<Utc>>) -> Result<Vec<ClaimFacts>>;
    /// What finishing these attempts needs, in the order given.
    fn finish_facts(&self, attempt_ids: &[i64]) -> Result<Vec<FinishFacts>>;
    /// What the version-sequence check reads for one intention (rare: only
    /// when the commitment moved during an attempt). `notice_purposes`:
    /// the purposes whose intention announces a new version.
    fn sequence_facts(&self, intention_id: i64, notice_purposes: &[&str]) -> Result<SequenceFacts>;
    /// The still-planned intentions of a commitment, by id.
    fn planned_of_commitment(&self, commitment_id: i64) -> Result<Vec<PlannedRow>>;

    // --- writing ---
    /// Inserts the reservations whose key is new (with their history row)
    /// and returns, for every one in order, the id and the stored
    /// fingerprint. Conflicts are the caller's to judge.
    fn reserve_many(&self, rows: &[Reservation<'_>]) -> Result<Vec<ReserveRow>>;
    /// Appends history rows; an `applied` row with a `from` state also
    /// moves its intention, only if it is still in `from` (else an error:
    /// the caller decided on a stale read).
    fn apply_records(&self, records: &[Record]) -> Result<()>;
    /// Writes attempts (with the lease of a claim); returns their ids in
    /// the order given.
    fn start_attempts(&self, rows: &[NewAttempt]) -> Result<Vec<i64>>;
    /// Writes claims (see [`NewClaim`]): the moves, their history rows and
    /// the attempts; returns the attempt ids in the order given. An
    /// intention no longer in its record's `from` state is an error.
    /// The default is [`LedgerTx::apply_records`] then
    /// [`LedgerTx::start_attempts`]; a backend overrides it to write the
    /// move and the lease in one set-based statement.
    fn start_claims(&self, claims: &[NewClaim]) -> Result<Vec<i64>> {
        let records: Vec<Record> = claims.iter().map(|c| c.record.clone()).collect();
        self.apply_records(&records)?;
        let attempts: Vec<NewAttempt> = claims.iter().map(|c| c.attempt.clone()).collect();
        self.start_attempts(&attempts)
    }
    /// A result batch: its channel references ([`LedgerTx::set_channel_refs`])
    /// and its moves, with the rows and guarantees of
    /// [`LedgerTx::apply_records`], in a few set-based statements; an
    /// intention's references are written with its move, in one row update.
    fn apply_results(&self, records: &[Record], refs: &[ChannelRefs]) -> Result<()>;
    /// Closes attempts, or annotates ones already closed.
    fn write_attempts(&self, rows: &[AttemptWrite]) -> Result<()>;
    /// Stores the channel's references on intentions (a newer value wins).
    fn set_channel_refs(&self, rows: &[ChannelRefs]) -> Result<()>;
    /// Sets (or clears) when intentions are due again.
    fn set_next_attempt(&self, rows: &[(i64, Option<DateTime<Utc>>)], at: DateTime<Utc>) -> Result<()>;
    /// Whether any status webhook waits for its intention (one probe).
    fn any_pending_status(&self) -> Result<bool>;
    /// The status webhooks waiting for this intention, in received order.
    fn pending_statuses_for(&self, intention_id: i64) -> Result<Vec<PendingStatus>>;
    /// Records provider references the first time they are learnt.
    fn set_provider_refs(&self, id: i64, command: Option<&str>, message: Option<&str>, at: DateTime<Utc>)
    -> Result<()>;
    /// Stores the history row core decides for one status report.
    fn apply_report(&self, id: i64, report: &Report, at: DateTime<Utc>) -> Result<(bool, IntentionState)>;
    /// Sets a stored channel event's processing status.
    fn mark_channel_event(
        &self,
        row: i64,
        status: crate::domain::channel_event::EventStatus,
        intention_id: Option<i64>,
        at: DateTime<Utc>,
    ) -> Result<()>;
    /// Adds `by` to a named counter.
    fn bump_counter(&self, counter: Counter, by: i64) -> Result<()>;
}

impl LedgerTx for Tx<'_> {
    fn clock(&self, caller: DateTime<Utc>) -> Result<DateTime<Utc>> {
        Tx::clock(self, caller)
    }
    fn intention(&self, id: i64) -> Result<IntentionRow> {
        Tx::intention(self, id)
    }
    fn due_ids(&self, scope: &ClaimScope, limit: u32, now: DateTime<Utc>) -> Result<Vec<i64>> {
        Tx::due_ids(self, scope, limit, now)
    }
    fn claim_facts(&self, ids: &[i64], day_start: Option<DateTime<Utc>>) -> Result<Vec<ClaimFacts>> {
        Tx::claim_facts(self, ids, day_start)
    }
    fn finish_facts(&self, attempt_ids: &[i64]) -> Result<Vec<FinishFacts>> {
        Tx::finish_facts(self, attempt_ids)
    }
    fn sequence_facts(&self, intention_id: i64, notice_purposes: &[&str]) -> Result<SequenceFacts> {
        Tx::sequence_facts(self, intention_id, notice_purposes)
    }
    fn planned_of_commitment(&self, commitment_id: i64) -> Result<Vec<PlannedRow>> {
        Tx::planned_of_commitment(self, commitment_id)
    }
    fn reserve_many(&self, rows: &[Reservation<'_>]) -> Result<Vec<ReserveRow>> {
        Tx::reserve_many(self, rows)
    }
    fn apply_records(&self, records: &[Record]) -> Result<()> {
        Tx::apply_records(self, records)
    }
    fn start_attempts(&self, rows: &[NewAttempt]) -> Result<Vec<i64>> {
        Tx::start_attempts(self, rows)
    }
    fn start_claims(&self, claims: &[NewClaim]) -> Result<Vec<i64>> {
        Tx::start_claims(self, claims)
    }
    fn apply_results(&self, records: &[Record], refs: &[ChannelRefs]) -> Result<()> {
        Tx::apply_results_set(self, records, refs)
    }
    fn write_attempts(&self, rows: &[AttemptWrite]) -> Result<()> {
        Tx::write_attempts(self, rows)
    }
    fn set_channel_refs(&self, rows: &[ChannelRefs]) -> Result<()> {
        Tx::set_channel_refs(self, rows)
    }
    fn set_next_attempt(&self, rows: &[(i64, Option<DateTime<Utc>>)], at: DateTime<Utc>) -> Result<()> {
        Tx::set_next_attempt(self, rows, at)
    }
    fn any_pending_status(&self) -> Result<bool> {
        Tx::any_pending_status(self)
    }
    fn pending_statuses_for(&self, intention_id: i64) -> Result<Vec<PendingStatus>> {
        Tx::pending_statuses_for(self, intention_id)
    }
    fn set_provider_refs(
        &self,
        id: i64,
        command: Option<&str>,
        message: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<()> {
        Tx::set_provider_refs(self, id, command, message, at)
    }
    fn apply_report(&self, id: i64, report: &Report, at: DateTime<Utc>) -> Result<(bool, IntentionState)> {
        Tx::apply_report(self, id, report, at)
    }
    fn mark_channel_event(
        &self,
        row: i64,
        status: crate::domain::channel_event::EventStatus,
        intention_id: Option<i64>,
        at: DateTime<Utc>,
    ) -> Result<()> {
        Tx::mark_channel_event(self, row, status, intention_id, at)
    }
    fn bump_counter(&self, counter: Counter, by: i64) -> Result<()> {
        Tx::bump_counter(self, counter, by)
    }
}
