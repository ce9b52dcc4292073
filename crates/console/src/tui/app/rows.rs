//! A paginated list whose cursor follows its row by identity.

use crate::store::{AttentionRow, Page, UpcomingRow};

/// What a list row is, whatever its position: the cursor follows it.
pub trait RowIdentity {
    fn identity(&self) -> (u8, i64);
}

impl RowIdentity for AttentionRow {
    fn identity(&self) -> (u8, i64) {
        (self.kind as u8, self.subject_id)
    }
}

impl RowIdentity for UpcomingRow {
    fn identity(&self) -> (u8, i64) {
        (0, self.commitment_id)
    }
}

/// A paginated list with a cursor. The cursor is kept on its case (by
/// identity) across refreshes, filters and re-sorting; only when that case
/// left the list does it stay at the same position.
#[derive(Debug, Clone)]
pub struct Rows<T> {
    pub rows: Vec<T>,
    pub total: i64,
    pub offset: u32,
    pub selected: usize,
    /// The selected row's identity, followed across reloads.
    pub anchor: Option<(u8, i64)>,
    pub loading: bool,
    pub loaded: bool,
}

impl<T> Default for Rows<T> {
    fn default() -> Self {
        Rows {
            rows: Vec::new(),
            total: 0,
            offset: 0,
            selected: 0,
            anchor: None,
            loading: false,
            loaded: false,
        }
    }
}

impl<T: RowIdentity> Rows<T> {
    pub(super) fn set(&mut self, page: Page<T>) {
        self.rows = page.rows;
        self.total = page.total;
        self.offset = page.offset;
        let found = self
            .anchor
            .and_then(|a| self.rows.iter().position(|r| r.identity() == a));
        self.selected = found.unwrap_or(self.selected).min(self.rows.len().saturating_sub(1));
        self.anchor = self.current().map(RowIdentity::identity);
        self.loading = false;
        self.loaded = true;
    }
    pub fn current(&self) -> Option<&T> {
        self.rows.get(self.selected)
    }
    /// Moves the cursor to `i` (clamped) and follows that row from now on.
    pub fn select(&mut self, i: usize) {
        self.selected = i.min(self.rows.len().saturating_sub(1));
        self.anchor = self.current().map(RowIdentity::identity);
    }
    pub(super) fn up(&mut self) {
        self.select(self.selected.saturating_sub(1));
    }
    pub(super) fn down(&mut self) {
        self.select(self.selected + 1);
    }
    /// Back to the first row (a new page, a new search).
    pub(super) fn top(&mut self) {
        self.selected = 0;
        self.anchor = None;
    }
}
