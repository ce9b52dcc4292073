//! Issue 25 §1 and §7, the fixes to today's navigation (these tests use
//! only what the console had before, so they run, and fail, on the code
//! before the fix): the search is kept when switching screens, `esc` puts
//! the cursor back where it was before a search, `G`/`End` reach the
//! list's last row, and the help opens with `:ayuda`, scrolls and closes
//! with `esc`.

mod tui_support;

use unavez::config::Role;
use unavez::store::RowKind;
use unavez::tui::app::App;
use unavez::tui::keys::{Action, Mode, Screen};

use tui_support::{clinic, render};

fn selected_row(app: &App) -> Option<(RowKind, i64)> {
    app.attention.current().map(|r| (r.kind, r.subject_id))
}

/// The phone of the Atención row `i` and its last four digits.
fn caller(app: &App, i: usize) -> (String, String) {
    let phone = app.attention.rows[i].phone.clone().expect("the demo clinic has phones");
    let tail = phone[phone.len() - 4..].to_string();
    (phone, tail)
}

#[test]
fn a_search_stays_when_switching_screens() {
    let mut fx = clinic(60);
    let mut app = fx.loaded(Role::FrontDesk, "recepcion");
    let (phone, tail) = caller(&app, 0);
    fx.search(&mut app, &tail);
    assert!(!app.attention.rows.is_empty());
    fx.act(&mut app, Action::Goto(Screen::Upcoming));
    assert_eq!(app.filter, tail, "the search is kept on screen 2");
    assert!(!app.upcoming.rows.is_empty());
    assert!(
        app.upcoming
            .rows
            .iter()
            .all(|u| u.phone.as_deref() == Some(phone.as_str())),
        "Próximas citas is filtered too"
    );
    let screen = render(&app, 80, 24);
    assert!(screen.contains(&format!("[filtro: {tail}]")), "{screen}");
    // And back on Atención it still applies.
    fx.act(&mut app, Action::NextScreen);
    fx.act(&mut app, Action::Goto(Screen::Attention));
    assert_eq!(app.filter, tail);
    // `esc` clears it where it is.
    fx.act(&mut app, Action::Back);
    assert!(app.filter.is_empty());
}

#[test]
fn esc_after_a_search_with_no_results_puts_the_cursor_back() {
    let mut fx = clinic(60);
    let mut app = fx.loaded(Role::FrontDesk, "recepcion");
    for _ in 0..3 {
        fx.act(&mut app, Action::Down);
    }
    let before = selected_row(&app);
    assert_eq!(app.attention.selected, 3);
    // Typed and abandoned with esc while typing…
    fx.act(&mut app, Action::OpenFilter);
    fx.type_text(&mut app, "zzqx");
    assert!(app.attention.rows.is_empty());
    fx.act(&mut app, Action::Abort);
    assert!(app.filter.is_empty());
    assert_eq!((app.attention.selected, selected_row(&app)), (3, before));
    // …or applied with enter, then cleared with esc.
    fx.search(&mut app, "zzqx");
    assert!(app.attention.rows.is_empty());
    fx.act(&mut app, Action::Back);
    assert_eq!((app.attention.selected, selected_row(&app)), (3, before));
}

#[test]
fn g_and_end_go_to_the_last_row_of_the_list_not_of_the_page() {
    let mut fx = clinic(60);
    let mut app = fx.app("supervisora", Role::Supervisor);
    app.page_size = 5;
    let reqs = app.load();
    fx.run(&mut app, reqs);
    let total = app.attention.total;
    assert!(total > 10, "several pages: {total}");
    fx.act(&mut app, Action::Bottom);
    let last_page = ((total - 1) / 5 * 5) as u32;
    assert_eq!(app.attention.offset, last_page);
    assert_eq!(
        i64::from(app.attention.offset) + app.attention.selected as i64,
        total - 1,
        "the cursor is on the list's last row"
    );
    fx.act(&mut app, Action::Top);
    assert_eq!((app.attention.offset, app.attention.selected), (0, 0));
}

#[test]
fn help_opens_with_colon_ayuda_scrolls_and_closes_with_esc() {
    let mut fx = clinic(20);
    let mut app = fx.loaded(Role::Supervisor, "supervisora");
    for word in ["ayuda", "help"] {
        fx.command(&mut app, word);
        assert_eq!(app.mode, Mode::Help, ":{word}");
        fx.act(&mut app, Action::Back);
        assert_eq!(app.mode, Mode::Normal);
    }
    fx.act(&mut app, Action::Help);
    let top = render(&app, 80, 24);
    assert_eq!(app.mode, Mode::Help);
    fx.act(&mut app, Action::PageDown);
    assert_eq!(app.mode, Mode::Help, "scrolling keeps the help open");
    let scrolled = render(&app, 80, 24);
    assert_ne!(top, scrolled, "the help scrolls");
    fx.act(&mut app, Action::Bottom);
    let bottom = render(&app, 80, 24);
    assert!(bottom.contains("Roles:"), "its last line is reachable: {bottom}");
    fx.act(&mut app, Action::Up);
    fx.act(&mut app, Action::Top);
    assert_eq!(render(&app, 80, 24), top);
    fx.act(&mut app, Action::Back);
    assert_eq!(app.mode, Mode::Normal);
    assert!(!app.quit);
}

#[test]
fn upcoming_and_the_footer_fit_80_columns_without_cutting_words() {
    let mut fx = clinic(60);
    let mut app = fx.loaded(Role::Supervisor, "supervisora");
    let screen = render(&app, 80, 24);
    let footer = screen.lines().nth(23).unwrap_or_default().to_string();
    for key in ["? ", "c ", "a ", "x ", "/ ", "q "] {
        assert!(
            footer.starts_with(key) || footer.contains(&format!("  {key}")),
            "the footer keeps `{key}`: {footer}"
        );
    }
    fx.act(&mut app, Action::Goto(Screen::Upcoming));
    let screen = render(&app, 80, 24);
    let table: Vec<&str> = screen.lines().skip(3).take(18).collect();
    assert!(table.iter().any(|l| l.contains("LLAMAR")), "{screen}");
    for line in table {
        let chars: Vec<char> = line.chars().collect();
        assert_eq!(chars.last(), Some(&'│'), "{line}");
        // The last column's text never runs into the border: it was cut.
        assert_eq!(chars[chars.len() - 2], ' ', "a word is cut at 80 columns: {line}");
    }
}

#[test]
fn slash_off_a_list_searches_atencion_and_a_new_search_starts_both_lists_at_their_first_page() {
    let mut fx = clinic(60);
    let mut app = fx.app("recepcion", Role::FrontDesk);
    app.page_size = 5;
    let reqs = app.load();
    fx.run(&mut app, reqs);
    let (phone, tail) = caller(&app, 0);
    // Próximas citas on a later page…
    fx.act(&mut app, Action::Goto(Screen::Upcoming));
    fx.act(&mut app, Action::PageDown);
    assert_eq!(app.upcoming.offset, 5);
    // …then a call comes in while the Tablero is open.
    fx.act(&mut app, Action::Goto(Screen::Board));
    fx.act(&mut app, Action::OpenFilter);
    assert_eq!((app.screen, app.mode), (Screen::Attention, Mode::Filter));
    fx.type_text(&mut app, &tail);
    fx.act(&mut app, Action::Submit);
    assert!(
        app.attention
            .rows
            .iter()
            .any(|r| r.phone.as_deref() == Some(phone.as_str()))
    );
    fx.act(&mut app, Action::Goto(Screen::Upcoming));
    assert_eq!(app.upcoming.offset, 0, "the search's rows, from the first");
    assert!(!app.upcoming.rows.is_empty());
}
