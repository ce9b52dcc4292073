//! Text that reaches a person's terminal must be inert: a patient's name or
//! an operator's reason is data, never a terminal command. Every human
//! listing (CLI tables, `show` commands, the console) passes stored text
//! through [`inert`]; JSON output stays exact.

use std::borrow::Cow;

/// Whether `c` would act on a terminal instead of printing: C0 controls
/// (ESC, BEL, CR, LF, TAB…), DEL and the C1 range (U+0080–U+009F, which
/// some terminals read as CSI and friends).
pub fn is_control(c: char) -> bool {
    c.is_control()
}

/// `s` with every control character replaced by a visible escape
/// (`\u{1b}` → `\e`, BEL → `\a`, CR → `\r`, LF → `\n`, TAB → `\t`, anything
/// else → `\u{XX}`), so that `"\u{1b}[31mRED"` prints as `\e[31mRED`.
/// Borrowed when there is nothing to neutralize (the common case).
pub fn inert(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\u{1b}' => out.push_str("\\e"),
            '\u{07}' => out.push_str("\\a"),
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if is_control(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        assert!(matches!(inert("Ana Quispe – Sede Miraflores"), Cow::Borrowed(_)));
        assert_eq!(inert("ñandú 😀"), "ñandú 😀");
    }

    #[test]
    fn escape_sequences_and_bells_become_visible() {
        assert_eq!(inert("\u{1b}[31mRED\u{1b}[0m\u{7}"), "\\e[31mRED\\e[0m\\a");
        assert_eq!(inert("a\r\nb\tc"), "a\\r\\nb\\tc");
    }

    #[test]
    fn every_c0_c1_and_del_is_neutralized() {
        for cp in (0u32..0x20).chain(0x7f..0xa0) {
            let c = char::from_u32(cp).unwrap();
            let out = inert(&c.to_string()).into_owned();
            assert!(!out.chars().any(is_control), "U+{cp:04X} → {out:?}");
            assert!(out.starts_with('\\'), "U+{cp:04X} → {out:?}");
        }
    }
}
