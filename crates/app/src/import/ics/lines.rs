//! RFC 5545 content lines (§3.1) read tolerantly, with physical line numbers.
//!
//! A hand-written reader rather than a crate's: the iCalendar parsers we
//! tried fail the whole file on one bad line, and report the line of the
//! calendar rather than the line that is wrong. Here a malformed line is an
//! error of *its own* line, kept on the component it belongs to, and the
//! rest of the file is still read: a UTF-8 BOM, several `VCALENDAR`s in one
//! file, text after `END:VCALENDAR`, and `VEVENT`s with no wrapper all read.

/// One content line: `NAME;PARAM=VALUE,VALUE;…:value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Prop {
    /// Upper case.
    pub name: String,
    /// `(KEY upper case, values with quotes removed)`.
    pub params: Vec<(String, Vec<String>)>,
    /// As written (escapes kept; see [`unescape`]).
    pub value: String,
    /// Physical line where the (folded) content line starts.
    pub line: usize,
}

impl Prop {
    /// The first value of a parameter.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .and_then(|(_, v)| v.first())
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }
}

/// A line that could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct LineError {
    pub line: usize,
    pub reason: String,
    /// The property the line seems to be (its leading name characters,
    /// upper case), so a caller can tell whether it needed it; `None` for
    /// a broken nesting (`BEGIN` without `END`) or a line with no name.
    pub prop: Option<String>,
}

/// `BEGIN:NAME` … `END:NAME`.
#[derive(Debug, Clone, Default)]
pub struct Comp {
    /// Upper case.
    pub name: String,
    pub props: Vec<Prop>,
    pub children: Vec<Comp>,
    /// Line of `BEGIN:`.
    pub begin: usize,
    /// The component's text as written (for the rejects file).
    pub raw: String,
    /// Lines inside this component (not its children) that could not be read.
    pub errors: Vec<LineError>,
}

impl Comp {
    pub fn prop(&self, name: &str) -> Option<&Prop> {
        self.props.iter().find(|p| p.name == name)
    }

    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Prop> + 'a {
        self.props.iter().filter(move |p| p.name == name)
    }

    /// A text property, unescaped and trimmed; `None` when empty.
    pub fn text(&self, name: &str) -> Option<String> {
        self.prop(name).map(|p| unescape(&p.value)).filter(|s| !s.is_empty())
    }
}

/// Everything read from a file.
#[derive(Debug, Default)]
pub struct Document {
    /// Top-level components: `VCALENDAR`s, or bare `VEVENT`s.
    pub components: Vec<Comp>,
    /// Text outside any component and lines that broke the nesting: not
    /// an event's, so they are reported as notes and never refuse anything.
    pub stray: Vec<LineError>,
}

/// Reads a whole file.
pub fn read(text: &str) -> Document {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let physical: Vec<&str> = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
    let mut doc = Document::default();
    // Open components, innermost last, each with the index of its first line.
    let mut open: Vec<(Comp, usize)> = Vec::new();
    for (first, last, logical) in unfold(&physical) {
        let line = first + 1;
        if logical.trim().is_empty() {
            continue;
        }
        let parsed = parse_line(&logical, line);
        let (name, value) = match &parsed {
            Ok(p) => (p.name.as_str(), p.value.trim().to_ascii_uppercase()),
            Err(_) => ("", String::new()),
        };
        if name == "BEGIN" && !value.is_empty() {
            open.push((
                Comp {
                    name: value,
                    begin: line,
                    ..Comp::default()
                },
                first,
            ));
            continue;
        }
        if name == "END" && !value.is_empty() {
            match open.iter().rposition(|(c, _)| c.name == value) {
                Some(pos) => {
                    // Components left open inside this one end here too.
                    while open.len() > pos + 1 {
                        let (mut inner, start) = open.pop().unwrap_or_default();
                        inner.errors.push(LineError {
                            line: inner.begin,
                            reason: format!("BEGIN:{} has no END:{}", inner.name, inner.name),
                            prop: None,
                        });
                        close(&mut open, &mut doc, inner, &physical[start..first]);
                    }
                    let (comp, start) = open.pop().unwrap_or_default();
                    close(&mut open, &mut doc, comp, &physical[start..=last]);
                }
                None => doc.stray.push(LineError {
                    line,
                    reason: format!("END:{value} without BEGIN:{value}: ignored"),
                    prop: None,
                }),
            }
            continue;
        }
        match (open.last_mut(), parsed) {
            (Some((c, _)), Ok(p)) => c.props.push(p),
            (Some((c, _)), Err(e)) => c.errors.push(e),
            (None, Ok(_)) => doc.stray.push(LineError {
                line,
                reason: "text outside any BEGIN/END component: ignored".into(),
                prop: None,
            }),
            (None, Err(e)) => doc.stray.push(LineError {
                reason: format!("{}: ignored", e.reason),
                ..e
            }),
        }
    }
    while let Some((mut c, start)) = open.pop() {
        c.errors.push(LineError {
            line: c.begin,
            reason: format!("BEGIN:{} has no END:{} (file cut short?)", c.name, c.name),
            prop: None,
        });
        close(&mut open, &mut doc, c, &physical[start..]);
    }
    doc
}

fn close(open: &mut [(Comp, usize)], doc: &mut Document, mut comp: Comp, lines: &[&str]) {
    comp.raw = lines.join("\n");
    match open.last_mut() {
        Some((parent, _)) => parent.children.push(comp),
        None => doc.components.push(comp),
    }
}

/// Joins folded lines (a line starting with a space or a tab continues the
/// previous one): `(first physical index, last physical index, text)`.
fn unfold(physical: &[&str]) -> Vec<(usize, usize, String)> {
    let mut out: Vec<(usize, usize, String)> = Vec::new();
    for (i, l) in physical.iter().enumerate() {
        if let Some(rest) = l.strip_prefix(' ').or_else(|| l.strip_prefix('\t'))
            && let Some(prev) = out.last_mut()
            && !prev.2.is_empty()
        {
            prev.2.push_str(rest);
            prev.1 = i;
            continue;
        }
        out.push((i, i, (*l).to_string()));
    }
    out
}

fn bad(line: usize, text: &str, reason: impl Into<String>) -> LineError {
    let name: String = text
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    LineError {
        line,
        reason: reason.into(),
        prop: Some(name.to_ascii_uppercase()).filter(|n| !n.is_empty()),
    }
}

/// `NAME *(";" param) ":" value`, with quoted parameter values that may
/// hold `;`, `:` and `,` (RFC 5545 §3.1, RFC 7986 multi-valued params).
/// An empty parameter (`DTSTART;;VALUE=DATE:…`, `DTSTART;:…`) is read as
/// no parameter, as python `icalendar` and `ical.js` read it.
pub fn parse_line(text: &str, line: usize) -> Result<Prop, LineError> {
    let bad = |reason: String| bad(line, text, reason);
    let name_end = text.find([';', ':']).ok_or_else(|| {
        bad(format!(
            "not a content line (no ':' after the property name): {:?}",
            shorten(text)
        ))
    })?;
    let name = &text[..name_end];
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(bad(format!("invalid property name {:?}", shorten(name))));
    }
    let mut params = Vec::new();
    let mut rest = &text[name_end..];
    while let Some(after) = rest.strip_prefix(';') {
        if after.starts_with([';', ':']) {
            rest = after;
            continue;
        }
        let eq = after
            .find('=')
            .ok_or_else(|| bad(format!("{name}: parameter without '=' ({:?})", shorten(after))))?;
        let key = after[..eq].trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Err(bad(format!("{name}: invalid parameter name {:?}", shorten(key))));
        }
        let (values, tail) =
            param_values(&after[eq + 1..]).ok_or_else(|| bad(format!("{name};{key}: unterminated quoted value")))?;
        params.push((key.to_ascii_uppercase(), values));
        rest = tail;
    }
    let value = rest
        .strip_prefix(':')
        .ok_or_else(|| bad(format!("{name}: no ':' before the value")))?;
    Ok(Prop {
        name: name.to_ascii_uppercase(),
        params,
        value: value.to_string(),
        line,
    })
}

/// Comma-separated values up to the next unquoted `;` or `:`; `None` when
/// a quote is not closed.
fn param_values(s: &str) -> Option<(Vec<String>, &str)> {
    let mut values = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => values.push(std::mem::take(&mut current)),
            ';' | ':' if !quoted => {
                values.push(current);
                return Some((values, &s[i..]));
            }
            c => current.push(c),
        }
    }
    if quoted {
        return None;
    }
    values.push(current);
    Some((values, ""))
}

/// TEXT value escapes (RFC 5545 §3.3.11): `\n`, `\,`, `\;`, `\\`.
pub fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') | Some('N') => out.push('\n'),
            Some(other) => out.push(other),
            None => {}
        }
    }
    out.trim().to_string()
}

fn shorten(s: &str) -> String {
    let mut t: String = s.chars().take(40).collect();
    if s.chars().count() > 40 {
        t.push('…');
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_and_multi_valued_parameters_are_read() {
        // RFC 7986 §5.11: a multi-valued, quoted parameter with ':' inside.
        let p = parse_line(
            "ATTENDEE;DELEGATED-FROM=\"mailto:a@x.pe\",\"mailto:b@x.pe\";CN=\"Quispe; Ana\":tel:+51987654321",
            3,
        )
        .unwrap();
        assert_eq!(p.name, "ATTENDEE");
        assert_eq!(p.params[0].1, ["mailto:a@x.pe", "mailto:b@x.pe"]);
        assert_eq!(p.param("cn"), Some("Quispe; Ana"));
        assert_eq!(p.value, "tel:+51987654321");
        let e = parse_line("SUMMARY;X=\"open:value", 9).unwrap_err();
        assert_eq!(e.line, 9);
        assert!(e.reason.contains("unterminated"), "{}", e.reason);
    }

    #[test]
    fn bom_folding_stray_text_and_bare_events() {
        let text = "\u{feff}BEGIN:VCALENDAR\r\nBEGIN:VEVENT\r\nSUMMARY:Ana\r\n  Quispe\r\nbroken line\r\nEND:VEVENT\r\n\
                    END:VCALENDAR\r\ntrailing junk\r\nBEGIN:VEVENT\nUID:x\nEND:VEVENT\n";
        let doc = read(text);
        assert_eq!(doc.components.len(), 2);
        let cal = &doc.components[0];
        let ev = &cal.children[0];
        assert_eq!((ev.begin, ev.text("SUMMARY").as_deref()), (2, Some("Ana Quispe")));
        assert_eq!(ev.errors, [bad(5, "broken", ev.errors[0].reason.clone())]);
        assert_eq!(ev.errors[0].prop.as_deref(), Some("BROKEN"));
        assert_eq!(doc.stray.len(), 1);
        assert_eq!(doc.stray[0].line, 8);
        assert_eq!(doc.components[1].name, "VEVENT");
        assert_eq!(doc.components[1].begin, 9);
        assert!(ev.raw.starts_with("BEGIN:VEVENT") && ev.raw.ends_with("END:VEVENT"));
    }

    #[test]
    fn an_unclosed_component_is_named() {
        let doc = read("BEGIN:VCALENDAR\nBEGIN:VEVENT\nUID:a\nEND:VCALENDAR\n");
        let ev = &doc.components[0].children[0];
        assert_eq!(ev.errors[0].line, 2);
        assert!(ev.errors[0].reason.contains("no END:VEVENT"));
    }

    #[test]
    fn text_escapes() {
        assert_eq!(
            unescape("Sede Miraflores\\, piso 2\\nTel\\; 1\\\\"),
            "Sede Miraflores, piso 2\nTel; 1\\"
        );
    }
}
