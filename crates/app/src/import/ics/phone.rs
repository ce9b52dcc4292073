//! Phones typed into calendar text, and the patient's name around them.
//!
//! Receptionists write the phone where they can: `Ana Quispe – 987 654 321 –
//! limpieza`. Candidate spans (a run of digits and the visual separators
//! people type, `+`, spaces, `-`, `.`, parentheses) are found here; whether
//! a span *is* a phone, and its E.164 form, is decided by libphonenumber's
//! metadata (the `phonenumber` crate) with the configured default country.

use phonenumber::{Mode, country};

/// A phone found in a property's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// E.164.
    pub phone: String,
    /// Byte range of the text it was read from.
    pub span: (usize, usize),
}

/// Normalizes one phone written as a person would (`987 654 321`,
/// `+51 987-654-321`, `(01) 234 5678`) to E.164, or `None` when
/// libphonenumber does not hold it for a valid number.
pub fn normalize(text: &str, default_country: country::Id) -> Option<String> {
    let n = phonenumber::parse(Some(default_country), text.trim()).ok()?;
    n.is_valid().then(|| n.format().mode(Mode::E164).to_string())
}

/// Every distinct valid phone in `text`, in order of appearance.
pub fn find(text: &str, default_country: country::Id) -> Vec<Found> {
    let mut out: Vec<Found> = Vec::new();
    for (start, end) in spans(text) {
        for f in split_valid(text, start, end, default_country) {
            if !out.iter().any(|o| o.phone == f.phone) {
                out.push(f);
            }
        }
    }
    out
}

fn is_sep(c: char) -> bool {
    matches!(c, ' ' | '-' | '.' | '(' | ')' | '\u{a0}')
}

/// Maximal runs of digits and separators (optionally led by `+`) holding
/// 7 to 20 digits and not glued to a letter (`ABC1234567` is a code).
fn spans(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (start, c) = chars[i];
        let glued = i > 0 && chars[i - 1].1.is_alphanumeric();
        if !(c.is_ascii_digit() || c == '+' || c == '(') || glued {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < chars.len() && (chars[j].1.is_ascii_digit() || is_sep(chars[j].1)) {
            j += 1;
        }
        // Back off trailing separators.
        let mut k = j;
        while k > i && !chars[k - 1].1.is_ascii_digit() {
            k -= 1;
        }
        let end = chars.get(k).map(|(b, _)| *b).unwrap_or(text.len());
        let digits = text[start..end].chars().filter(char::is_ascii_digit).count();
        let glued_after = chars.get(k).is_some_and(|(_, c)| c.is_alphabetic());
        if (7..=20).contains(&digits) && !glued_after {
            out.push((start, end));
        }
        i = j.max(i + 1);
    }
    out
}

/// The valid phones in one span: the whole span, else the longest runs of
/// its space-separated groups (a date typed next to a phone, `12.01
/// 987 654 321`), leftmost first, never overlapping.
fn split_valid(text: &str, start: usize, end: usize, cc: country::Id) -> Vec<Found> {
    let whole = &text[start..end];
    if !has_date(whole)
        && let Some(phone) = normalize(whole, cc)
    {
        return vec![Found {
            phone,
            span: (start, end),
        }];
    }
    // Groups as byte ranges.
    let mut groups = Vec::new();
    let mut g_start = None;
    for (i, c) in whole.char_indices() {
        match (c == ' ' || c == '\u{a0}', g_start) {
            (false, None) => g_start = Some(i),
            (true, Some(s)) => {
                groups.push((s, i));
                g_start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = g_start {
        groups.push((s, whole.len()));
    }
    let mut out = Vec::new();
    let mut from = 0;
    'outer: while from < groups.len() {
        for to in (from..groups.len()).rev() {
            let (a, b) = (groups[from].0, groups[to].1);
            let digits = whole[a..b].chars().filter(char::is_ascii_digit).count();
            if digits >= 7
                && !has_date(&whole[a..b])
                && let Some(phone) = normalize(&whole[a..b], cc)
            {
                out.push(Found {
                    phone,
                    span: (start + a, start + b),
                });
                from = to + 1;
                continue 'outer;
            }
        }
        from += 1;
    }
    out
}

/// Whether a space-separated group is a date (`12.01.2027`, `2027-01-12`,
/// `12/01/27`): numbering plans accept many of those digit strings.
fn has_date(s: &str) -> bool {
    s.split([' ', '\u{a0}']).any(|g| {
        let parts: Vec<usize> = g.split(['.', '-', '/']).map(str::len).collect();
        let all_digits = g.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '/'));
        all_digits
            && parts.len() == 3
            && (matches!(parts[..], [1..=2, 1..=2, 2 | 4]) || matches!(parts[..], [4, 1..=2, 1..=2]))
    })
}

/// Words people write before a phone (`Tel.`, `Cel:`…), removed with it.
const LABELS: &[&str] = &[
    "telefono",
    "teléfono",
    "tel",
    "tlf",
    "telf",
    "cel",
    "celular",
    "movil",
    "móvil",
    "whatsapp",
    "wsp",
    "fono",
    "phone",
    "mobile",
];

/// The text with the phone's span (and a label right before it) replaced
/// by a separator: the phone stood between two pieces of the text.
pub fn without(text: &str, span: (usize, usize)) -> String {
    let before = text[..span.0].trim_end_matches([' ', ':', '.', '#']);
    let lower = before.to_lowercase();
    let cut = LABELS
        .iter()
        .filter(|l| {
            lower.ends_with(*l)
                && lower[..lower.len() - l.len()]
                    .chars()
                    .last()
                    .is_none_or(|c| !c.is_alphanumeric())
        })
        .map(|l| before.len() - l.len())
        .next()
        .unwrap_or(before.len());
    format!("{} – {}", &before[..cut], &text[span.1..])
}

/// A SUMMARY cut at the separators people type between name, phone and
/// service (`–`, `—`, `|`, `/`, `,`, `;`, `:`, `(`, `)`, and `-` between
/// spaces); pieces without a letter are dropped.
pub fn segments(text: &str) -> Vec<String> {
    text.replace(" - ", " – ")
        .split(['–', '—', '|', '/', ',', ';', ':', '(', ')', '·', '\n'])
        .map(|s| s.trim().trim_matches(['-', '.', ' ']).trim().to_string())
        .filter(|s| s.chars().any(char::is_alphabetic))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PE: country::Id = country::Id::PE;

    #[test]
    fn the_ways_people_type_a_peruvian_mobile() {
        for t in [
            "987 654 321",
            "987-654-321",
            "+51 987654321",
            "987654321",
            "+51 (987) 654-321",
            "51987654321",
        ] {
            assert_eq!(normalize(t, PE).as_deref(), Some("+51987654321"), "{t}");
        }
        assert_eq!(normalize("12345", PE), None);
        assert_eq!(normalize("+34 612 345 678", PE).as_deref(), Some("+34612345678"));
    }

    #[test]
    fn phones_are_found_in_text() {
        let s = "Ana Quispe – 987 654 321 – limpieza";
        let f = find(s, PE);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].phone, "+51987654321");
        assert_eq!(&s[f[0].span.0..f[0].span.1], "987 654 321");
        assert_eq!(segments(&without(s, f[0].span)), ["Ana Quispe", "limpieza"]);
        let d = "Control 12.01.2027 Tel: 987-654-321, también 911 222 333";
        let phones: Vec<String> = find(d, PE).into_iter().map(|f| f.phone).collect();
        assert_eq!(phones, ["+51987654321", "+51911222333"]);
        assert!(find("Historia HC2027001234, sala 3, 09:30", PE).is_empty());
        assert!(find("Pedido 20270112", PE).is_empty(), "a date is not a phone");
    }

    #[test]
    fn labels_go_with_the_phone() {
        let s = "Rosa Díaz Tel. 987654321 - control";
        let f = &find(s, PE)[0];
        assert_eq!(segments(&without(s, f.span)), ["Rosa Díaz", "control"]);
        assert_eq!(
            segments("María-José Pérez - ortodoncia"),
            ["María-José Pérez", "ortodoncia"]
        );
    }
}
