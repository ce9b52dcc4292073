//! Finding the caller (issue 25 §1) on both backends: María Flores, phone
//! +51 908 439 509, among patients with similar names and numbers, is
//! found by every form of her phone and her name (any order, accents and
//! case ignored, one typo in a word of four letters or more), exact
//! matches first. Through the store's own search (Próximas citas' and
//! Atención's filter), on a SQLite file and a PostgreSQL schema.

mod backends_fixture;
mod pg_common;

use chrono::{DateTime, Duration, TimeZone, Utc};
use unavez_ledger::domain::commitment::{Commitment, CommitmentKind};
use unavez_ledger::domain::lifecycle::CommitmentStatus;
use unavez_ledger::store::{AttentionQuery, Store, StoreError};

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 15, 0, 0).unwrap()
}

/// `(name, phone)`, the later in the list the earlier the appointment: a
/// list in time order alone would put every look-alike before María.
const PATIENTS: &[(&str, &str)] = &[
    ("María Flores", "+51908439509"),
    ("Mario Flores", "+51908439510"),
    ("Marta Flores", "+51918409509"),
    ("María Florez Quispe", "+51977000001"),
    ("Maria Fuentes", "+51977000002"),
    ("Rosa Flores", "+51977000003"),
    ("Ana Rojas", "+51977000004"),
    ("Flor María Salas", "+51977000005"),
];

fn seed(store: &mut Store) {
    store
        .write(|tx| {
            for (n, (name, phone)) in PATIENTS.iter().enumerate() {
                let at = now();
                let contact = tx.upsert_contact(phone, Some(name), None, at)?;
                let c = Commitment {
                    reference: format!("cita-{}", 100 + n),
                    kind: CommitmentKind::Appointment,
                    status: CommitmentStatus::Scheduled,
                    version: 1,
                    starts_at: Some(now() + Duration::hours(48 - n as i64)),
                    service: None,
                    location: None,
                    phone: Some(phone.to_string()),
                    name: Some(name.to_string()),
                    language: None,
                    confirmed_at: None,
                    manual_contact_at: None,
                };
                tx.save_commitment(&c, Some(contact), at)?;
            }
            Ok::<_, StoreError>(())
        })
        .unwrap();
}

/// The names Próximas citas lists for `text`, in order.
fn found(store: &mut Store, text: &str) -> Vec<String> {
    store
        .read(|tx| tx.upcoming(now(), now() + Duration::days(7), Some(text), 50, 0))
        .unwrap()
        .rows
        .into_iter()
        .map(|r| r.name.unwrap_or_default())
        .collect()
}

#[test]
fn every_phone_form_finds_the_caller() {
    backends_fixture::both(|store, _| {
        seed(store);
        for typed in [
            "908439509",
            "908 439 509",
            "908-439-509",
            "908.439.509",
            "(908) 439-509",
            "+51908439509",
            "+51 908 439 509",
            "51908439509",
            "439509",
            "8439509",
        ] {
            assert_eq!(found(store, typed), ["María Flores"], "{typed}");
        }
        // Four trailing digits are shared: both callers are offered.
        let mut last4 = found(store, "9509");
        last4.sort();
        assert_eq!(last4, ["Marta Flores", "María Flores"]);
        assert!(found(store, "+51 900 000 000").is_empty());
    });
}

#[test]
fn names_are_found_in_any_order_with_one_typo_exact_first() {
    backends_fixture::both(|store, _| {
        seed(store);
        for typed in ["maria flores", "flores maria", "MARÍA FLÓRES", "María  Flores"] {
            // Exact first, then the names one typo away (`mario`,
            // `marta`, `florez`), each group in time order.
            assert_eq!(
                found(store, typed),
                ["María Flores", "María Florez Quispe", "Marta Flores", "Mario Flores"],
                "{typed}"
            );
        }
        // One typo in a word of four letters or more is forgiven.
        for typed in ["marai flores", "maria florse", "mria flores", "marias flores"] {
            let names = found(store, typed);
            assert!(names.contains(&"María Flores".to_string()), "{typed}: {names:?}");
        }
        // A name only one typo away never ranks before the exact one.
        let names = found(store, "mario flores");
        assert_eq!(names.first().map(String::as_str), Some("Mario Flores"));
        assert!(names.contains(&"María Flores".to_string()));
        // Two typos in a word are not forgiven.
        assert!(!found(store, "amrai flores").contains(&"María Flores".to_string()));
        // Nor one in a word of three letters: `ama` is not `ana`.
        assert!(found(store, "ama rojas").is_empty());
        assert_eq!(found(store, "ana rojas"), ["Ana Rojas"]);
    });
}

#[test]
fn a_renamed_contact_is_found_by_its_new_name_and_phone() {
    backends_fixture::both(|store, fixture| {
        seed(store);
        fixture.sql(
            "UPDATE commitments SET contact_name = NULL;
             UPDATE contacts SET name = 'Lucía Huamán', phone = '+51955111222' WHERE phone = '+51908439509'",
        );
        assert!(found(store, "908439509").is_empty());
        assert!(found(store, "maria flores").iter().all(|n| n != "Lucía Huamán"));
        assert_eq!(found(store, "huaman lucia"), ["Lucía Huamán"]);
        assert_eq!(found(store, "955 111 222"), ["Lucía Huamán"]);
        word_sets_agree(fixture);
        fixture.sql("UPDATE commitments SET contact_name = 'Rosa Quispe' WHERE ref = 'cita-101'");
        assert_eq!(found(store, "quispe rosa"), ["Rosa Quispe"]);
        word_sets_agree(fixture);
    });
}

/// PostgreSQL's word sets (migration 0010, what name searches read there)
/// hold exactly the name words of every commitment, after any rename.
fn word_sets_agree(fixture: &backends_fixture::Fixture) {
    if let backends_fixture::Fixture::Pg(_) = fixture {
        let differ = fixture.int(
            "SELECT count(*) FROM (
                 (SELECT commitment_id, array_agg(word ORDER BY word) AS words FROM commitment_search_names
                  GROUP BY commitment_id
                  EXCEPT SELECT commitment_id, words FROM commitment_search_word_sets)
                 UNION ALL
                 (SELECT commitment_id, words FROM commitment_search_word_sets
                  EXCEPT SELECT commitment_id, array_agg(word ORDER BY word) FROM commitment_search_names
                  GROUP BY commitment_id)) AS d",
        );
        assert_eq!(differ, Some(0));
        assert!(fixture.int("SELECT count(*) FROM commitment_search_word_sets") > Some(0));
    }
}

/// A ledger from before the search indexes (SQLite at version 11) gets
/// them on its first open after the upgrade: phones, name words and the
/// typo index of the names already stored.
#[test]
fn an_upgraded_ledger_finds_its_existing_patients() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.db");
    let mut store = Store::open(&path).unwrap();
    seed(&mut store);
    drop(store);
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(
            "DROP TRIGGER contact_phone_suffixes_insert; DROP TRIGGER contact_phone_suffixes_update;
             DROP TRIGGER contact_phone_suffixes_delete; DROP TABLE contact_phone_suffixes;
             DROP TRIGGER commitment_search_names_insert; DROP TRIGGER commitment_search_names_update;
             DROP TRIGGER commitment_search_names_delete; DROP TRIGGER commitment_search_names_contact;
             DROP TABLE commitment_search_words; DROP TABLE commitment_search_names; DROP TABLE name_word_deletes;
             DROP TABLE feed_held; DROP TABLE feed_seen; DROP TABLE feeds;
             ALTER TABLE dispatchers DROP COLUMN channel_instance;
             PRAGMA user_version = 11;",
        )
        .unwrap();
    let mut store = Store::open(&path).unwrap();
    assert_eq!(found(&mut store, "+51 908 439 509"), ["María Flores"]);
    assert!(found(&mut store, "marai flores").contains(&"María Flores".to_string()));
    assert_eq!(found(&mut store, "flores maria")[0], "María Flores");
}

/// Atención's filter finds the same patients in the same rank: each
/// patient has a case (an uncertain message), the exact match first.
#[test]
fn atencion_ranks_the_exact_match_first() {
    backends_fixture::both(|store, fixture| {
        seed(store);
        for id in 1..=PATIENTS.len() as i64 {
            fixture.intention(id, id, "uncertain", "");
        }
        let names = |store: &mut Store, text: &str| -> Vec<String> {
            let mut q = AttentionQuery::new(now());
            q.filter = Some(text.to_string());
            let page = store.read(|tx| tx.attention(&q)).unwrap();
            page.rows.into_iter().map(|r| r.name.unwrap_or_default()).collect()
        };
        assert_eq!(
            names(store, "flores maria"),
            ["María Flores", "María Florez Quispe", "Marta Flores", "Mario Flores"]
        );
        assert_eq!(names(store, "908-439-509"), ["María Flores"]);
        // Every match here forgives a typo: one rank, in the list's order.
        assert!(names(store, "marai flores").contains(&"María Flores".to_string()));
    });
}

/// A large import in one transaction stays linear on PostgreSQL (migration
/// 0011): the name-word triggers plan their statements when they run, so
/// once `commitment_search_names` has grown each firing probes it by index.
/// With plans made on the empty table and kept for the session, as
/// PL/pgSQL did with 0007's and 0010's statements, every later commitment
/// (and every renamed contact) read the whole table again: quadratic, a
/// million-intention copy never finished. Counted, not timed: this
/// transaction's own sequential scans of the table.
#[test]
fn a_large_import_reads_the_names_by_index() {
    let schema = unavez_testkit::PgSchema::new();
    drop(pg_common::ledger(&schema));
    let mut c = postgres::Client::connect(&schema.url, postgres::NoTls).unwrap();
    let mut tx = c.transaction().unwrap();
    let (contacts, commitments) = (2_000, 6_000);
    let scans = |tx: &mut postgres::Transaction<'_>| -> i64 {
        tx.query_one(
            "SELECT seq_scan FROM pg_stat_xact_user_tables
             WHERE relname = 'commitment_search_names' AND schemaname = current_schema()",
            &[],
        )
        .unwrap()
        .get(0)
    };
    // One statement per row, as the ledger saves them: each commitment
    // fires 0007's row trigger and through it the word-set trigger; the
    // names come from the contact (three commitments each).
    tx.batch_execute(&format!(
        "DO $$ BEGIN
             FOR k IN 1..{contacts} LOOP
                 INSERT INTO contacts(id, phone, name, created_at, updated_at)
                     VALUES (k, '+5190000' || lpad(k::text, 4, '0'), 'María Flores ' || k, 0, 0);
             END LOOP;
             FOR k IN 1..{commitments} LOOP
                 INSERT INTO commitments(id, ref, kind, status, version, created_at, updated_at, contact_id)
                     VALUES (k, 'cita-' || k, 'appointment', 'scheduled', 1, 0, 0, 1 + k % {contacts});
             END LOOP;
         END $$;"
    ))
    .unwrap();
    let saved = scans(&mut tx);
    // Every contact renamed, one statement each (0007's contact trigger
    // rewrites the words of its three commitments).
    tx.batch_execute(&format!(
        "DO $$ BEGIN
             FOR k IN 1..{contacts} LOOP
                 UPDATE contacts SET name = 'Rosa Quispe ' || k WHERE id = k;
             END LOOP;
         END $$;"
    ))
    .unwrap();
    let renamed = scans(&mut tx) - saved;
    let count = |tx: &mut postgres::Transaction<'_>, words: &str| -> i64 {
        tx.query_one(
            &format!("SELECT count(*) FROM commitment_search_word_sets WHERE words @> ARRAY[{words}]"),
            &[],
        )
        .unwrap()
        .get(0)
    };
    assert_eq!(count(&mut tx, "'quispe', 'rosa'"), commitments);
    assert_eq!(count(&mut tx, "'maria'"), 0);
    assert!(
        saved < commitments / 2,
        "{saved} sequential scans of the name words for {commitments} commitments"
    );
    assert!(
        renamed < contacts / 2,
        "{renamed} sequential scans of the name words for {contacts} renamed contacts"
    );
}
