//! `[import]`: how calendar files and feeds are read.

use serde::{Deserialize, Serialize};

use super::{FeedConfig, feeds};

/// `[import]`: how calendar files are read (`unavez import agenda.ics`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ImportConfig {
    /// ISO 3166 country of phones typed without a country code
    /// (`987 654 321` → `+51987654321` with `"PE"`).
    pub default_country: String,
    /// How many days ahead the occurrences of a recurring event are
    /// imported; later ones are imported by a later import of the file.
    pub recurrence_days: u32,
    /// Where a phone typed as text is looked for, in this order, after
    /// `X-UNAVEZ-PHONE` and an `ATTENDEE` with a `tel:` URI.
    pub phone_properties: Vec<String>,
    /// The furthest ahead an appointment may start, in days from the
    /// import (or the booking API's request): anything later is refused at
    /// the door, naming the line and `starts_at` (a mistyped year).
    pub max_days_ahead: u32,
    /// `[[import.feed]]`: calendars `unavez serve` polls over HTTP.
    pub feed: Vec<FeedConfig>,
}

/// The widest `[import] max_days_ahead`: about ten years.
pub const MAX_DAYS_AHEAD_LIMIT: u32 = 3660;

/// The text properties `[import] phone_properties` may name.
pub const PHONE_PROPERTIES: [&str; 5] = ["SUMMARY", "DESCRIPTION", "LOCATION", "COMMENT", "CONTACT"];

impl Default for ImportConfig {
    fn default() -> Self {
        ImportConfig {
            default_country: "PE".into(),
            recurrence_days: 60,
            phone_properties: vec!["SUMMARY".into(), "DESCRIPTION".into(), "LOCATION".into()],
            max_days_ahead: 400,
            feed: Vec::new(),
        }
    }
}

impl ImportConfig {
    /// The default country as libphonenumber's id (validated at load).
    pub fn country(&self) -> phonenumber::country::Id {
        self.default_country
            .trim()
            .to_ascii_uppercase()
            .parse()
            .unwrap_or(phonenumber::country::Id::PE)
    }

    /// `(field, message)` of the first bad setting.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let code = self.default_country.trim().to_ascii_uppercase();
        if code.parse::<phonenumber::country::Id>().is_err() {
            return Err((
                "import.default_country".into(),
                format!(
                    "unknown country {:?} (expected an ISO 3166 code such as \"PE\")",
                    self.default_country
                ),
            ));
        }
        if !(1..=731).contains(&self.recurrence_days) {
            return Err((
                "import.recurrence_days".into(),
                format!("must be between 1 and 731 days, got {}", self.recurrence_days),
            ));
        }
        if !(1..=MAX_DAYS_AHEAD_LIMIT).contains(&self.max_days_ahead) {
            return Err((
                "import.max_days_ahead".into(),
                format!(
                    "must be between 1 and {MAX_DAYS_AHEAD_LIMIT} days, got {}",
                    self.max_days_ahead
                ),
            ));
        }
        if self.recurrence_days > self.max_days_ahead {
            return Err((
                "import.recurrence_days".into(),
                format!(
                    "{} days would expand occurrences past import.max_days_ahead ({})",
                    self.recurrence_days, self.max_days_ahead
                ),
            ));
        }
        if let Some(p) = self
            .phone_properties
            .iter()
            .find(|p| !PHONE_PROPERTIES.contains(&p.to_ascii_uppercase().as_str()))
        {
            return Err((
                "import.phone_properties".into(),
                format!("{p:?} is not one of {}", PHONE_PROPERTIES.join(", ")),
            ));
        }
        feeds::validate_all(&self.feed)
    }
}
