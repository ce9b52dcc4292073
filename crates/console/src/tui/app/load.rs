//! Loading and moving between screens: the requests a screen needs, the
//! clock tick that refreshes what is shown (never piling loads up on a
//! slow ledger), and going to another screen with the search kept.

use super::*;

impl App {
    /// The requests that (re)load the current screen, plus the status line.
    pub fn load(&mut self) -> Vec<Request> {
        let mut out = vec![Request::Status { now: self.now }];
        out.extend(self.load_screen(self.screen));
        out
    }

    pub(super) fn filter_opt(&self) -> Option<String> {
        let f = self.filter.trim();
        (!f.is_empty()).then(|| f.to_string())
    }

    pub(super) fn load_screen(&mut self, screen: Screen) -> Vec<Request> {
        match screen {
            Screen::Attention => {
                self.attention.loading = true;
                let mut q = AttentionQuery::new(self.now);
                q.rule = self.attention_rule;
                q.filter = self.filter_opt();
                // Parked and refused channel events are technicians' cases.
                q.channel_events = self.role() == Role::Technician;
                if self.show_handled {
                    q.view = AttentionView::HandledSince(self.day_start());
                }
                q.limit = self.page_size;
                q.offset = self.attention.offset;
                self.widen_for_call_list(&mut q);
                vec![Request::Attention(q)]
            }
            Screen::Upcoming => {
                self.upcoming.loading = true;
                vec![Request::Upcoming {
                    from: self.now - Duration::hours(1),
                    to: self.now + Duration::hours(self.upcoming_hours),
                    filter: self.filter_opt(),
                    limit: self.page_size,
                    offset: self.upcoming.offset,
                }]
            }
            Screen::Board => {
                let day = OperatingDay::new(self.day);
                let start_of = |d: NaiveDate| {
                    d.and_hms_opt(0, 0, 0)
                        .and_then(|t| t.and_local_timezone(self.tz).earliest())
                        .map(|t| t.with_timezone(&Utc))
                };
                let day_start = start_of(self.day).unwrap_or(self.now);
                let day_end = self
                    .day
                    .succ_opt()
                    .and_then(start_of)
                    .unwrap_or(day_start + Duration::days(1));
                let mut out = vec![Request::Board { day }, Request::BoardHours { day, day_start }];
                let fresh = self
                    .board_day_asked
                    .is_some_and(|(d, at)| d == self.day && self.now - at < Duration::seconds(BOARD_DAY_SECONDS));
                if !fresh {
                    // Another day's figures never show under this one.
                    if self.board_day_asked.map(|(d, _)| d) != Some(self.day) {
                        self.board_day = None;
                    }
                    self.board_day_asked = Some((self.day, self.now));
                    out.push(Request::BoardDay {
                        day,
                        day_start,
                        day_end,
                        now: self.now,
                    });
                }
                out
            }
            Screen::Counter => match &self.counter_query {
                Some(q) => {
                    self.counter.loading = true;
                    vec![Request::Counter {
                        query: q.clone(),
                        limit: self.page_size,
                        offset: self.counter.offset,
                    }]
                }
                None => vec![],
            },
            Screen::Detail => match self.detail.as_ref().map(|d| d.intention.id) {
                Some(id) => vec![Request::Detail {
                    id_or_key: id.to_string(),
                }],
                None => vec![],
            },
            Screen::Reprocess => vec![Request::ReprocessPlan {
                day: OperatingDay::new(self.day),
                states: self.reprocess.states.clone(),
            }],
            Screen::Patient => self.load_patient(),
        }
    }

    /// A clock tick: move `now` and refresh what is on screen unless a load
    /// is still running (so a slow database never piles requests up).
    pub fn tick(&mut self, now: DateTime<Utc>) -> Vec<Request> {
        self.now = now;
        let mut reqs = self.commit_due();
        if self
            .flash
            .as_ref()
            .is_some_and(|f| now - f.at >= Duration::seconds(FLASH_SECONDS))
        {
            self.flash = None;
        }
        let busy = match self.screen {
            Screen::Attention => self.attention.loading,
            Screen::Upcoming => self.upcoming.loading,
            Screen::Counter => self.counter.loading,
            Screen::Detail => self.detail_loading,
            Screen::Patient => self.patient.loading,
            _ => false,
        };
        if busy || self.mode != Mode::Normal {
            reqs.push(Request::Status { now });
        } else {
            reqs.extend(self.load());
        }
        reqs
    }

    pub(super) fn goto(&mut self, screen: Screen) -> Vec<Request> {
        if screen == self.screen {
            return self.load_screen(screen);
        }
        if matches!(
            screen,
            Screen::Attention | Screen::Upcoming | Screen::Board | Screen::Reprocess
        ) {
            // The search stays: the caller is the same on every list.
            self.back.clear();
        } else {
            self.back.push(self.screen);
        }
        self.screen = screen;
        self.load_screen(screen)
    }
}
