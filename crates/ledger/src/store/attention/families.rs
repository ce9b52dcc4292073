//! The resend families of a page of intentions, read for the whole page
//! at once (issue 25 §3): each row's hint must see what the resend guard
//! sees (a resend of the family still pending, the day's count), and one
//! statement per [`FAMILY_BATCH`] rows keeps the page free of a query per
//! row. Only rows are read here; `domain::guard::Family::facts` derives
//! the rules' facts from them, as the action does.

use std::collections::HashMap;

use super::super::{Result, Tx};
use super::{AttentionRow, RESEND_ASK, RowKind};
use crate::domain::guard::{Family, FamilyResend};
use crate::sql::Value;
use crate::store::UpcomingRow;

/// Intentions per statement (a page's worth: Atención shows 50).
const FAMILY_BATCH: usize = 50;

/// A chain longer than this is a corrupt ledger, not a family (the same
/// bound `unavez_app::ops` follows to find an original).
const MAX_DEPTH: u32 = 64;

/// From each selected intention up to its family's original (resends made
/// before the guard existed may relate to another resend), then down to
/// every member; one row per (selected, member), with the original's and
/// its commitment's columns. Padding ids are `NULL` and select nothing, so
/// the statement's text (and its prepared plan) never changes.
fn families_sql() -> String {
    let ids = (1..=FAMILY_BATCH)
        .map(|n| format!("?{n}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "WITH RECURSIVE up(sel, id, rel, d) AS (
             SELECT i.id, i.id, i.related_id, 0 FROM intentions i WHERE i.id IN ({ids})
             UNION ALL SELECT up.sel, i.id, i.related_id, up.d + 1
                 FROM up JOIN intentions i ON i.id = up.rel WHERE up.d < {MAX_DEPTH}),
         fam_root(sel, rid) AS (SELECT sel, id FROM up WHERE rel IS NULL),
         down(sel, id, d) AS (
             SELECT sel, rid, 0 FROM fam_root
             UNION ALL SELECT down.sel, i.id, down.d + 1
                 FROM down JOIN intentions i ON i.related_id = down.id WHERE down.d < {MAX_DEPTH})
         SELECT d.sel, d.id = o.id, m.key, m.state, m.authorized_by, m.created_at,
             o.state, o.commitment_version, o.expires_at, c.version
         FROM down d JOIN fam_root f ON f.sel = d.sel JOIN intentions o ON o.id = f.rid
             JOIN commitments c ON c.id = o.commitment_id JOIN intentions m ON m.id = d.id
         ORDER BY d.sel, m.id"
    )
}

impl Tx<'_> {
    /// The resend family of each of `ids` (any member selects its
    /// family), by selected id. An id of no intention is absent.
    pub fn families(&self, ids: &[i64]) -> Result<HashMap<i64, Family>> {
        let sql = families_sql();
        let mut out: HashMap<i64, Family> = HashMap::new();
        for batch in ids.chunks(FAMILY_BATCH) {
            let args: Vec<Value> = (0..FAMILY_BATCH).map(|k| batch.get(k).copied().into()).collect();
            let rows = self.db().rows(&sql, &args, |r| {
                let member = FamilyResend {
                    key: r.text(2)?,
                    state: r.state(3)?,
                    authorized_by: r.opt_text(4)?,
                    created_at: r.time(5)?,
                };
                let original = Family {
                    original: r.state(6)?,
                    planned_version: r.int(7)?,
                    current_version: r.int(9)?,
                    expires_at: r.opt_time(8)?,
                    resends: Vec::new(),
                };
                Ok((r.int(0)?, r.flag(1)?, member, original))
            })?;
            for (sel, is_original, member, original) in rows {
                let family = out.entry(sel).or_insert(original);
                if !is_original {
                    family.resends.push(member);
                }
            }
        }
        Ok(out)
    }

    /// The patient card's messages: each one's family and front-desk
    /// request, for the whole card at once.
    pub(in crate::store) fn fill_card_guards(&self, rows: &mut [UpcomingRow]) -> Result<()> {
        let ids: Vec<i64> = rows
            .iter()
            .flat_map(|c| c.notifications.iter().map(|n| n.intention_id))
            .collect();
        let mut families = self.families(&ids)?;
        let mut asks = self.resend_asks(&ids)?;
        for n in rows.iter_mut().flat_map(|c| c.notifications.iter_mut()) {
            n.family = families.remove(&n.intention_id);
            n.resend_ask = asks.remove(&n.intention_id);
        }
        Ok(())
    }

    /// [`RESEND_ASK`] of each of `ids` that has one.
    fn resend_asks(&self, ids: &[i64]) -> Result<HashMap<i64, String>> {
        let list = (1..=FAMILY_BATCH)
            .map(|n| format!("?{n}"))
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!("SELECT i.id, {RESEND_ASK} FROM intentions i WHERE i.id IN ({list})");
        let mut out = HashMap::new();
        for batch in ids.chunks(FAMILY_BATCH) {
            let args: Vec<Value> = (0..FAMILY_BATCH).map(|k| batch.get(k).copied().into()).collect();
            for (id, ask) in self.db().rows(&sql, &args, |r| Ok((r.int(0)?, r.opt_text(1)?)))? {
                if let Some(ask) = ask {
                    out.insert(id, ask);
                }
            }
        }
        Ok(out)
    }

    /// Each intention row's [`AttentionRow::family`], for the whole page.
    pub fn fill_families(&self, rows: &mut [AttentionRow]) -> Result<()> {
        let ids: Vec<i64> = rows
            .iter()
            .filter(|r| r.kind == RowKind::Intention)
            .filter_map(|r| r.intention_id)
            .collect();
        let mut families = self.families(&ids)?;
        for r in rows.iter_mut().filter(|r| r.kind == RowKind::Intention) {
            r.family = r.intention_id.and_then(|id| families.remove(&id));
        }
        Ok(())
    }
}
