//! `unavez import agenda.csv`: the bytes of a file, decoded (UTF-8,
//! UTF-16 with a BOM, Windows-1252) and read as an agenda export.
#![no_main]

use libfuzzer_sys::fuzz_target;
use unavez_app::import::{FileKind, parse_bytes};

fuzz_target!(|data: &[u8]| {
    let _ = parse_bytes(data, "fuzz.csv", FileKind::Csv, chrono_tz::America::Lima);
});
