//! The patient card's reads: a patient is a contact (one phone). The
//! console finds patients with the same search as its lists
//! ([`Tx::patients`], for the chooser) and reads one patient's
//! commitments in a time window with their intentions
//! ([`Tx::patient_card`]). Both are served by indexes: the search's, the
//! contacts' unique phone and `commitments_contact`.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::attention::Search;
use super::console::upcoming_row;
use super::search::matched_commitments_sql;
use super::{Result, Tx, UpcomingRow, ms};
use crate::vals;

/// One patient a search found (a line of the chooser).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PatientMatch {
    pub contact_id: i64,
    /// Raw E.164; the console masks it.
    pub phone: String,
    /// The contact's name, or the latest name a booking gave for it.
    pub name: Option<String>,
}

/// One patient and their commitments in a window, each with its
/// intentions (as Próximas citas reads them).
#[derive(Debug, Clone, Serialize)]
pub struct PatientCard {
    pub contact_id: i64,
    /// Raw E.164; the console masks it.
    pub phone: String,
    pub name: Option<String>,
    /// Ordered by start time, then id.
    pub commitments: Vec<UpcomingRow>,
}

impl Tx<'_> {
    /// The patients whose commitments `filter` matches (the lists' search),
    /// at most `limit`, ordered by name then phone.
    pub fn patients(&self, filter: &str, limit: u32) -> Result<Vec<PatientMatch>> {
        let db = self.db();
        let Some(search) = Search::parse(Some(filter), self.phone_country) else {
            return Ok(Vec::new());
        };
        let matches = self.search_matches(&search)?;
        let pg = db.is_pg();
        // `?2` the matched commitments (a JSON array, see `store/search.rs`),
        // exact and one-typo matches alike: the chooser lists them by name.
        let sql = format!(
            "SELECT k.id, k.phone, max(coalesce(k.name, c.contact_name))
             FROM {} JOIN contacts k ON k.id = c.contact_id
             GROUP BY k.id, k.phone
             ORDER BY max(coalesce(k.name, c.contact_name)), k.phone LIMIT ?1",
            matched_commitments_sql(pg, "?2")
        );
        let args = vals![i64::from(limit.max(1)), matches.all_json()];
        Ok(db.rows(&sql, &args, |r| {
            Ok(PatientMatch {
                contact_id: r.int(0)?,
                phone: r.text(1)?,
                name: r.opt_text(2)?,
            })
        })?)
    }

    /// The patient with this phone (E.164, as stored) and their
    /// commitments starting in `[from, to)`; `None` when no contact has
    /// the phone.
    pub fn patient_card(&self, phone: &str, from: DateTime<Utc>, to: DateTime<Utc>) -> Result<Option<PatientCard>> {
        let db = self.db();
        let contact = db.row(
            "SELECT id, phone, name FROM contacts WHERE phone = ?1",
            &vals![phone.to_string()],
            |r| Ok((r.int(0)?, r.text(1)?, r.opt_text(2)?)),
        )?;
        let Some((contact_id, phone, name)) = contact else {
            return Ok(None);
        };
        let mut commitments = db.rows(
            "SELECT c.id, c.ref, c.kind, c.status, c.version, c.starts_at, k.phone, c.confirmed_at,
                    c.manual_contact_at, c.reschedule_requested_at, coalesce(c.contact_name, k.name)
             FROM commitments c JOIN contacts k ON k.id = c.contact_id
             WHERE c.contact_id = ?1 AND c.starts_at >= ?2 AND c.starts_at < ?3
             ORDER BY c.starts_at, c.id",
            &vals![contact_id, ms(from), ms(to)],
            upcoming_row,
        )?;
        self.fill_notifications(&mut commitments)?;
        self.fill_card_guards(&mut commitments)?;
        // A booking may name the patient when the contact has no name.
        let name = name.or_else(|| commitments.iter().rev().find_map(|c| c.name.clone()));
        Ok(Some(PatientCard {
            contact_id,
            phone,
            name,
            commitments,
        }))
    }
}
