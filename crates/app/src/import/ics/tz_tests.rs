//! Unit tests of `tz.rs`: time zone names as exporters write them, and VTIMEZONE rules.

use super::*;
use crate::import::ics::lines;

fn at(s: &str) -> NaiveDateTime {
    NaiveDateTime::parse_from_str(s, "%Y%m%dT%H%M%S").unwrap()
}

#[test]
fn names_as_exporters_write_them() {
    let lima = Some(chrono_tz::America::Lima);
    assert_eq!(by_name("America/Lima", "PE"), lima);
    assert_eq!(by_name("america/lima", "PE"), lima);
    assert_eq!(
        by_name("/freeassociation.sourceforge.net/Tzfile/America/Lima", "PE"),
        lima
    );
    assert_eq!(by_name("/freeassociation.sourceforge.net/America/Lima", "PE"), lima);
    assert_eq!(by_name("/mozilla.org/20070129_1/America/Lima", "PE"), lima);
    assert_eq!(by_name("SA Pacific Standard Time", "PE"), lima);
    assert_eq!(
        by_name("SA Pacific Standard Time", "CO"),
        Some(chrono_tz::America::Bogota)
    );
    assert_eq!(
        by_name("Pacific Standard Time", "PE"),
        Some(chrono_tz::America::Los_Angeles),
        "CLDR's world default when the country has none"
    );
    assert_eq!(by_name("(UTC-05:00) Bogota, Lima, Quito", "PE"), lima);
    assert_eq!(
        by_name("(UTC-05:00) Bogota, Lima, Quito", "CO"),
        Some(chrono_tz::America::Bogota)
    );
    assert_eq!(
        by_name("(UTC-05:00) Bogota, Lima, Quito", "US"),
        Some(chrono_tz::America::Bogota),
        "the first city when none is in the country"
    );
    assert_eq!(by_name("Customized Time Zone", "PE"), None);
}

const VTZ: &str = "BEGIN:VTIMEZONE\nTZID:Customized Time Zone\nBEGIN:STANDARD\nDTSTART:16010101T020000\n\
    TZOFFSETFROM:-0400\nTZOFFSETTO:-0500\nRRULE:FREQ=YEARLY;BYDAY=1SU;BYMONTH=11\nEND:STANDARD\nBEGIN:DAYLIGHT\n\
    DTSTART:16010101T020000\nTZOFFSETFROM:-0500\nTZOFFSETTO:-0400\nRRULE:FREQ=YEARLY;BYDAY=2SU;BYMONTH=3\n\
    END:DAYLIGHT\nEND:VTIMEZONE\n";

#[test]
fn a_vtimezone_defines_its_own_rules() {
    let doc = lines::read(VTZ);
    let zones = Zones::new(doc.components.iter().collect(), "PE");
    let z = zones.resolve("Customized Time Zone").unwrap();
    assert!(matches!(z, Zone::Defined(_)));
    // US-style rules: winter −5, summer −4 (as New York).
    assert_eq!(
        z.localize(at("20270115T093000")).unwrap().to_rfc3339(),
        "2027-01-15T09:30:00-05:00"
    );
    assert_eq!(
        z.localize(at("20270715T093000")).unwrap().to_rfc3339(),
        "2027-07-15T09:30:00-04:00"
    );
    assert!(z.localize(at("20270314T023000")).is_err(), "the spring-forward gap");
    assert!(zones.resolve("Nowhere").unwrap_err().contains("Nowhere"));
    let lic = VTZ.replace(
        "TZID:Customized Time Zone\n",
        "TZID:Mine\nX-LIC-LOCATION:America/Lima\n",
    );
    let doc = lines::read(&lic);
    let zones = Zones::new(doc.components.iter().collect(), "PE");
    assert!(matches!(
        zones.resolve("Mine").unwrap(),
        Zone::Iana(chrono_tz::America::Lima)
    ));
}

#[test]
fn offsets() {
    assert_eq!(offset(Some("-0500")), Some(-18000));
    assert_eq!(offset(Some("+0530")), Some(19800));
    assert_eq!(offset(Some("+013000")), Some(5400));
    assert_eq!(offset(Some("0500")), None);
}
