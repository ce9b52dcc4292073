//! Colours readable on dark and on light terminals.
//!
//! Every view takes its colours from one [`Palette`] (`app.palette`) by
//! meaning (accent, ok, warning, error…), never a fixed `Color::`: the dark
//! palette is the console's historic look; the light one swaps the colours
//! that wash out on a white background (yellow, cyan, green, grey) for
//! darker 256-colour shades. Highlights never depend on colour: the
//! selected row is reverse video in every theme and with `NO_COLOR`.
//!
//! `theme = "auto"` (the default, `[console]` in the config) reads
//! `COLORFGBG`, which rxvt, Konsole, iTerm2 and others set to `fg;bg`: a
//! background of 0–6 or 8 is dark, 7 or 9–15 light; unset or unreadable,
//! the console assumes dark, the most common terminal look.

use ratatui::style::{Color, Modifier, Style};

use crate::config::Theme;
use crate::domain::attention::Situation;
use crate::domain::state::IntentionState;

/// Which palette a terminal gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shade {
    Dark,
    Light,
}

/// The palette's choice: `dark` and `light` as configured; `auto` from
/// `COLORFGBG` (its value, if set), dark when it says nothing usable.
pub fn shade(theme: Theme, colorfgbg: Option<&str>) -> Shade {
    match theme {
        Theme::Dark => Shade::Dark,
        Theme::Light => Shade::Light,
        Theme::Auto => colorfgbg.and_then(background).unwrap_or(Shade::Dark),
    }
}

/// The background named by a `COLORFGBG` value (`15;0`, `0;default;15`):
/// its last field, an ANSI colour number.
fn background(value: &str) -> Option<Shade> {
    let bg: u8 = value.rsplit(';').next()?.trim().parse().ok()?;
    match bg {
        0..=6 | 8 => Some(Shade::Dark),
        7 | 9..=15 => Some(Shade::Light),
        _ => None,
    }
}

/// The console's colours, by meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Palette {
    pub shade: Shade,
    /// Active tab, key names, the title's background.
    pub accent: Color,
    /// Text on an `accent` background.
    pub on_accent: Color,
    /// Done, delivered, read, running.
    pub ok: Color,
    /// Uncertain, refused, read-only, a filter on, needs a call.
    pub warn: Color,
    /// Failed, errors, stopped.
    pub error: Color,
    /// Review and reschedule requests.
    pub review: Color,
    /// Secondary text: hints, empty lists, axis labels.
    pub dim: Color,
    /// The Tablero's series: messages sent, delivered, read, failed.
    pub sent: Color,
    pub delivered: Color,
    pub read: Color,
    pub failed: Color,
    /// Latency p50 and p95, and the queue.
    pub p50: Color,
    pub p95: Color,
    pub queue: Color,
}

/// The console's historic colours, for dark backgrounds.
pub static DARK: Palette = Palette {
    shade: Shade::Dark,
    accent: Color::Cyan,
    on_accent: Color::Black,
    ok: Color::Green,
    warn: Color::Yellow,
    error: Color::Red,
    review: Color::Magenta,
    dim: Color::DarkGray,
    sent: Color::Cyan,
    delivered: Color::Green,
    read: Color::Blue,
    failed: Color::Red,
    p50: Color::Cyan,
    p95: Color::Magenta,
    queue: Color::Yellow,
};

/// For light backgrounds: shades with a contrast of about 4.5:1 or more
/// on white (xterm's 256-colour cube), where yellow, cyan, green and
/// grey would fade.
pub static LIGHT: Palette = Palette {
    shade: Shade::Light,
    accent: Color::Blue,
    on_accent: Color::White,
    ok: Color::Indexed(28),
    warn: Color::Indexed(130),
    error: Color::Red,
    review: Color::Indexed(127),
    dim: Color::Indexed(243),
    sent: Color::Indexed(31),
    delivered: Color::Indexed(28),
    read: Color::Blue,
    failed: Color::Red,
    p50: Color::Indexed(31),
    p95: Color::Indexed(127),
    queue: Color::Indexed(130),
};

impl Palette {
    pub fn of(shade: Shade) -> &'static Palette {
        match shade {
            Shade::Dark => &DARK,
            Shade::Light => &LIGHT,
        }
    }

    pub fn dim(&self) -> Style {
        Style::new().fg(self.dim)
    }

    pub fn fg(&self, c: Color) -> Style {
        Style::new().fg(c)
    }

    /// The accent in bold: active tab, key names.
    pub fn key(&self) -> Style {
        Style::new().fg(self.accent).add_modifier(Modifier::BOLD)
    }

    /// Something that stops work (an error, a stopped dispatcher):
    /// reversed too, so it reads without colour.
    pub fn alarm(&self) -> Style {
        Style::new()
            .fg(self.error)
            .add_modifier(Modifier::BOLD | Modifier::REVERSED)
    }

    /// An intention state (or `stuck` / `reschedule`) in a list, read
    /// from its word ([`Palette::situation`]).
    pub fn state(&self, state: &str) -> Style {
        Situation::parse(state, false).map_or(Style::new(), |s| self.situation(s))
    }

    /// What an Atención row shows, by an exhaustive match: a new state or
    /// pseudo-state must choose its colour here.
    pub fn situation(&self, s: Situation) -> Style {
        use IntentionState as S;
        match s {
            Situation::State(S::Uncertain) | Situation::Stuck | Situation::Unconfirmed => self.fg(self.warn),
            Situation::State(S::Review) | Situation::Reschedule => self.fg(self.review),
            Situation::State(S::Failed) => self.fg(self.error),
            Situation::State(S::Delivered | S::Read) => self.fg(self.ok),
            Situation::State(S::Cancelled) => self.dim(),
            Situation::State(S::Planned | S::Dispatching | S::Accepted | S::Sent) | Situation::RefusedEvent => {
                Style::new()
            }
            // A person must look at a technician's event.
            Situation::ChannelEvent(e) if e.is_technicians_case() => self.fg(self.review),
            Situation::ChannelEvent(_) => Style::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_themes_ignore_the_terminal() {
        assert_eq!(shade(Theme::Dark, Some("0;15")), Shade::Dark);
        assert_eq!(shade(Theme::Light, Some("15;0")), Shade::Light);
        assert_eq!(shade(Theme::Light, None), Shade::Light);
    }

    #[test]
    fn auto_reads_the_background_from_colorfgbg() {
        assert_eq!(shade(Theme::Auto, Some("15;0")), Shade::Dark);
        assert_eq!(shade(Theme::Auto, Some("0;15")), Shade::Light);
        assert_eq!(shade(Theme::Auto, Some("0;7")), Shade::Light);
        assert_eq!(shade(Theme::Auto, Some("7;8")), Shade::Dark);
        // rxvt's three-field form: the background is the last one.
        assert_eq!(shade(Theme::Auto, Some("0;default;15")), Shade::Light);
        assert_eq!(shade(Theme::Auto, Some("15;default;0")), Shade::Dark);
    }

    #[test]
    fn auto_falls_back_to_dark() {
        assert_eq!(shade(Theme::Auto, None), Shade::Dark);
        for unusable in ["", "default", "15;default", "0;200", "garbage;x"] {
            assert_eq!(shade(Theme::Auto, Some(unusable)), Shade::Dark, "{unusable:?}");
        }
    }

    #[test]
    fn the_light_palette_avoids_colours_that_fade_on_white() {
        let faint = [
            Color::Yellow,
            Color::Cyan,
            Color::Green,
            Color::DarkGray,
            Color::Gray,
            Color::White,
        ];
        let l = &LIGHT;
        for c in [
            l.accent,
            l.ok,
            l.warn,
            l.error,
            l.review,
            l.dim,
            l.sent,
            l.delivered,
            l.read,
            l.failed,
            l.p50,
            l.p95,
            l.queue,
        ] {
            assert!(!faint.contains(&c), "{c:?}");
        }
        assert_eq!(Palette::of(Shade::Light), &LIGHT);
        assert_eq!(Palette::of(Shade::Dark), &DARK);
    }
}
