//! Finding a patient who calls: what a typed search means.
//!
//! The front desk types what it has: the number on the caller ID in any
//! shape (`908439509`, `+51 908-439-509`, `(01) 234 5678`), its last
//! digits (`9509`, `439509`), or the name in any order, with or without
//! accents and with a typo (`flores maria`, `MARÍA FLÓRES`, `marai`).
//! This module reads such a query ([`PatientQuery::parse`]) into
//!
//! - **phone suffixes**: the number's E.164 digits as libphonenumber reads
//!   it with the clinic's default country, and the digits as typed; a
//!   contact matches when its phone's digits end with one of them (a run of
//!   at least [`MIN_PHONE_DIGITS`]);
//! - **name tokens**: the text folded ([`fold`]: lower case, accents
//!   dropped) and split into words, each of which must match a word of the
//!   patient's name, in any order: the same word ([`Closeness::Exact`]) or,
//!   for a word of at least [`MIN_TYPO_LEN`] letters, one typo away
//!   ([`Closeness::OneTypo`]: optimal-string-alignment distance 1, see
//!   [`osa`]).
//!
//! The ledger holds the name words of every commitment in an index, and
//! the vocabulary filed SymSpell-style: every word under itself and under
//! each of its [`deletes`]. Two words within OSA distance 1 always share
//! one of those strings (an insertion or deletion: the shorter word is a
//! deletion of the longer; a replacement or a swap of adjacent letters:
//! deleting the changed letter, or either swapped one, gives the same
//! string), so a typed word's candidates are the words filed under itself
//! and its own deletions — a handful of index probes however large the
//! vocabulary — and [`Closeness::of`] keeps those really one typo away.
//! Exact matches rank before fuzzy ones ([`Closeness`]'s order).

use phonenumber::Mode;
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// The country of numbers typed without a country code (ISO 3166, as
/// libphonenumber names it; the clinic's `default_country`).
pub use phonenumber::country::Id as Country;

/// The shortest run of trailing digits a search looks up: fewer digits
/// match too many phones to tell a caller apart.
pub const MIN_PHONE_DIGITS: usize = 4;

/// The shortest typed word a typo is forgiven in: one letter changed in a
/// three-letter word (`ana` → `ama`, `eva`) is another name.
pub const MIN_TYPO_LEN: usize = 4;

/// The longest phone (E.164 allows 15 digits).
pub const MAX_PHONE_DIGITS: usize = 15;

/// Lower case with accents and other combining marks dropped, as the
/// ledger's indexes fold names (`María Núñez` → `maria nunez`).
pub fn fold(text: &str) -> String {
    text.nfd()
        .filter(|c| !is_combining_mark(*c))
        .flat_map(char::to_lowercase)
        .collect()
}

/// The folded words of a name or a query, in order: runs of letters and
/// digits.
pub fn name_tokens(text: &str) -> Vec<String> {
    fold(text)
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// The optimal-string-alignment distance between two words, in
/// characters: the fewest insertions, deletions, replacements and swaps of
/// two adjacent characters that turn one into the other, no character
/// edited twice.
pub fn osa(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// How a typed word matched a word of the name; exact sorts first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Closeness {
    Exact,
    OneTypo,
}

impl Closeness {
    /// How the typed (folded) word `typed` matches the name's word `word`,
    /// or `None`: a typo is forgiven only in a word of [`MIN_TYPO_LEN`]
    /// letters or more.
    pub fn of(typed: &str, word: &str) -> Option<Closeness> {
        if typed == word {
            Some(Closeness::Exact)
        } else if typed.chars().count() >= MIN_TYPO_LEN && osa(typed, word) <= 1 {
            Some(Closeness::OneTypo)
        } else {
            None
        }
    }
}

/// The distinct words one deletion away from `word` (what the ledger
/// files a vocabulary word under, besides itself, and what it looks a
/// typed word up by).
pub fn deletes(word: &str) -> Vec<String> {
    let chars: Vec<char> = word.chars().collect();
    let mut out: Vec<String> = (0..chars.len())
        .map(|i| chars[..i].iter().chain(&chars[i + 1..]).collect())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The digits of a phone-shaped query (digits and the separators people
/// type: `+`, spaces, `-`, `.`, `/`, parentheses), as the suffixes a
/// contact's phone digits may end with: its E.164 digits when
/// libphonenumber reads it, with `country`, as a valid number (`(01) 234
/// 5678` → `5112345678`, `908 439 509` → `51908439509`), and the digits as
/// typed (a trailing run such as `439509`). `None` when the text is not
/// phone-shaped or has fewer than [`MIN_PHONE_DIGITS`] digits.
pub fn phone_suffixes(text: &str, country: Country) -> Option<Vec<String>> {
    let text = text.trim();
    if !text.chars().all(|c| c.is_ascii_digit() || "+ -.()/".contains(c)) {
        return None;
    }
    let typed: String = text.chars().filter(char::is_ascii_digit).collect();
    if typed.len() < MIN_PHONE_DIGITS || typed.len() > MAX_PHONE_DIGITS + 2 {
        return None;
    }
    let mut out = Vec::new();
    if let Ok(n) = phonenumber::parse(Some(country), text)
        && n.is_valid()
    {
        out.push(
            n.format()
                .mode(Mode::E164)
                .to_string()
                .trim_start_matches('+')
                .to_string(),
        );
    }
    if !out.contains(&typed) && typed.len() <= MAX_PHONE_DIGITS {
        out.push(typed);
    }
    Some(out)
}

/// Every suffix of at least [`MIN_PHONE_DIGITS`] digits of a stored phone
/// (its digits, `+` and separators left out): what the ledger indexes for
/// each contact.
pub fn stored_phone_suffixes(phone: &str) -> Vec<String> {
    let digits: String = phone.chars().filter(char::is_ascii_digit).collect();
    (MIN_PHONE_DIGITS..=digits.len().min(MAX_PHONE_DIGITS))
        .map(|n| digits[digits.len() - n..].to_string())
        .collect()
}

/// A typed search, read for the indexes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatientQuery {
    /// The phone suffixes to look up (see [`phone_suffixes`]); empty when
    /// the text is not a phone.
    pub phone: Vec<String>,
    /// The folded name words, every one of which must match a word of the
    /// name; empty when the text holds a word without letters (a
    /// reference's number, a key) or is a phone.
    pub names: Vec<String>,
}

impl PatientQuery {
    /// Reads a typed search; `None` when there is nothing to search.
    pub fn parse(text: &str, country: Country) -> Option<PatientQuery> {
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        if let Some(phone) = phone_suffixes(text, country) {
            return Some(PatientQuery {
                phone,
                names: Vec::new(),
            });
        }
        let mut names = name_tokens(text);
        if names.iter().any(|w| !w.chars().any(char::is_alphabetic)) {
            names.clear();
        }
        names.sort();
        names.dedup();
        Some(PatientQuery {
            phone: Vec::new(),
            names,
        })
    }

    /// How well `name` matches the query's words: each typed word matches
    /// some word of the name, and the result is the worst of those; `None`
    /// when a typed word matches none (or the query has no words).
    pub fn name_closeness(&self, name: &str) -> Option<Closeness> {
        if self.names.is_empty() {
            return None;
        }
        let words = name_tokens(name);
        self.names
            .iter()
            .map(|t| words.iter().filter_map(|w| Closeness::of(t, w)).min())
            .try_fold(Closeness::Exact, |worst, c| c.map(|c| worst.max(c)))
    }
}

#[cfg(test)]
#[path = "search_tests.rs"]
mod tests;
