//! `unavez import agenda.ics`: the bytes of a calendar file, decoded and
//! read as iCalendar VEVENTs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use unavez_app::import::{FileKind, parse_bytes};

fuzz_target!(|data: &[u8]| {
    let _ = parse_bytes(data, "fuzz.ics", FileKind::Ics, chrono_tz::America::Lima);
});
