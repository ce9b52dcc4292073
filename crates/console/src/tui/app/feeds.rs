//! `:calendario` / `:feeds` (issue 27 §2): the disappearances a calendar
//! feed lost at once, held until a person decides. The overlay lists each
//! feed with held appointments; `c` confirms (cancels them), `d` discards
//! (releases them), both through the usual reason form and confirmation,
//! run by `ops::run` like every action, so both are audited.

use super::*;
use crate::tui::worker::FeedHold;

/// The overlay's state.
#[derive(Debug, Clone, Default)]
pub struct FeedsView {
    /// `None`: asked, not answered yet.
    pub holds: Option<Vec<FeedHold>>,
    /// The feed under the cursor.
    pub selected: usize,
}

impl FeedsView {
    /// The feed under the cursor, if any is held.
    pub fn current(&self) -> Option<&FeedHold> {
        self.holds.as_ref()?.get(self.selected)
    }
}

impl App {
    /// Whether this operator may review held disappearances at all.
    pub fn may_review_feeds(&self) -> bool {
        !self.access.read_only && allowed(self.role(), OpKind::FeedConfirm)
    }

    /// `:calendario`: opens the overlay and asks for the holds; a role
    /// that may not act is refused, as its keys are.
    pub(super) fn open_feeds(&mut self) -> Vec<Request> {
        if self.access.read_only {
            return self.on_action(Action::ReadOnly);
        }
        if !allowed(self.role(), OpKind::FeedConfirm) {
            return self.on_action(Action::Refused(OpKind::FeedConfirm));
        }
        self.feeds = FeedsView::default();
        self.mode = Mode::Feeds;
        vec![Request::FeedHolds]
    }

    pub(super) fn on_feeds(&mut self, a: Action) -> Vec<Request> {
        let count = self.feeds.holds.as_ref().map(Vec::len).unwrap_or(0);
        match a {
            Action::Quit => self.quit = true,
            Action::Up => self.feeds.selected = self.feeds.selected.saturating_sub(1),
            Action::Down => self.feeds.selected = (self.feeds.selected + 1).min(count.saturating_sub(1)),
            Action::Op(op @ (OpKind::FeedConfirm | OpKind::FeedDiscard)) => {
                let Some(feed) = self.feeds.current().map(|h| h.feed.clone()) else {
                    self.flash(FlashKind::Info, self.t.feeds_none.into());
                    return vec![];
                };
                self.mode = Mode::Normal;
                return self.show_form(op, super::update::unattached_target(feed));
            }
            Action::Refused(_) | Action::ReadOnly => {
                self.mode = Mode::Normal;
                return self.on_action(a);
            }
            Action::Back => self.mode = Mode::Normal,
            _ => {}
        }
        vec![]
    }

    /// The worker's answer: the holds, the cursor kept on the list.
    pub(super) fn on_feed_holds(&mut self, r: Result<Vec<FeedHold>, Failure>) {
        match r {
            Ok(holds) => {
                self.feeds.selected = self.feeds.selected.min(holds.len().saturating_sub(1));
                self.feeds.holds = Some(holds);
            }
            Err(e) => {
                self.feeds.holds = Some(Vec::new());
                if self.mode == Mode::Feeds {
                    self.mode = Mode::Normal;
                }
                self.fail(e);
            }
        }
    }
}
