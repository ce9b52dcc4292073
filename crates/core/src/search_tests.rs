use super::*;

const PE: Country = Country::PE;

fn q(text: &str) -> PatientQuery {
    PatientQuery::parse(text, PE).unwrap()
}

#[test]
fn folding_drops_case_and_accents() {
    assert_eq!(fold("MARÍA FLÓRES"), "maria flores");
    assert_eq!(fold("Núñez Güémez"), "nunez guemez");
    assert_eq!(fold("ÁÉÍÓÚÜÑ àèìòù"), "aeiouun aeiou");
    assert_eq!(
        name_tokens("  María-José  O'Brien, Pérez "),
        ["maria", "jose", "o", "brien", "perez"]
    );
    assert!(name_tokens(" -- ").is_empty());
}

#[test]
fn osa_counts_each_kind_of_edit_once() {
    assert_eq!(osa("maria", "maria"), 0);
    assert_eq!(osa("maria", "marai"), 1, "adjacent swap");
    assert_eq!(osa("maria", "mara"), 1, "deletion");
    assert_eq!(osa("maria", "marias"), 1, "insertion");
    assert_eq!(osa("rosa", "rusa"), 1, "replacement in a 4-letter word");
    assert_eq!(osa("maria", "amrai"), 2, "two swaps");
    assert_eq!(osa("ca", "abc"), 3, "OSA, not Damerau: no edit of a swapped pair");
    assert_eq!(osa("", "abc"), 3);
    assert_eq!(osa("flores", "florse"), 1);
    assert_eq!(osa("quispe", "qispe"), 1);
    assert_eq!(osa("lópez", "lopez"), 1, "osa works on characters, folding is separate");
}

#[test]
fn osa_is_symmetric_and_bounded_by_the_longer_word() {
    let words = [
        "", "a", "ab", "ba", "ana", "maria", "marai", "mario", "flores", "florez", "rosa", "ruso",
    ];
    for a in words {
        for b in words {
            assert_eq!(osa(a, b), osa(b, a), "{a} {b}");
            assert!(osa(a, b) <= a.chars().count().max(b.chars().count()));
            assert_eq!(osa(a, b) == 0, a == b);
        }
    }
}

#[test]
fn a_typo_is_forgiven_only_in_a_word_of_four_letters_or_more() {
    assert_eq!(Closeness::of("maria", "maria"), Some(Closeness::Exact));
    assert_eq!(Closeness::of("marai", "maria"), Some(Closeness::OneTypo));
    assert_eq!(Closeness::of("rusa", "rosa"), Some(Closeness::OneTypo));
    assert_eq!(Closeness::of("ama", "ana"), None, "three letters: another name");
    assert_eq!(Closeness::of("ana", "ana"), Some(Closeness::Exact));
    assert_eq!(Closeness::of("amrai", "maria"), None, "two typos");
    assert!(Closeness::Exact < Closeness::OneTypo);
}

#[test]
fn deletes_are_distinct() {
    assert_eq!(deletes("anna"), ["ana", "ann", "nna"]);
    assert_eq!(deletes("aaa"), ["aa"]);
    assert_eq!(deletes("ab"), ["a", "b"]);
    assert!(deletes("").is_empty());
}

/// Every string of length 1 to `max` over `alphabet`.
fn all_words(alphabet: &[char], max: usize) -> Vec<String> {
    let mut out: Vec<String> = vec![String::new()];
    let mut last = vec![String::new()];
    for _ in 0..max {
        last = last
            .iter()
            .flat_map(|w| alphabet.iter().map(move |c| format!("{w}{c}")))
            .collect();
        out.extend(last.iter().cloned());
    }
    out.retain(|w| !w.is_empty());
    out
}

#[test]
fn words_one_typo_apart_always_share_a_filed_string() {
    // Exhaustively over a small alphabet (with a repeated-letter case and
    // an accent-free multibyte letter): the SymSpell lookup misses no word
    // within distance 1, and the distance check rejects what it brings
    // that is further.
    let words = all_words(&['a', 'b', 'ñ'], 5);
    let filed = |w: &str| {
        let mut f = deletes(w);
        f.push(w.to_string());
        f
    };
    let files: Vec<Vec<String>> = words.iter().map(|w| filed(w)).collect();
    for (i, a) in words.iter().enumerate() {
        for (j, b) in words.iter().enumerate() {
            let d = osa(a, b);
            let share = files[i].iter().any(|x| files[j].contains(x));
            if d <= 1 {
                assert!(share, "{a} {b}");
            }
            if !share {
                assert!(d >= 2, "{a} {b}");
            }
        }
    }
}

#[test]
fn every_phone_form_reads_as_the_same_number() {
    let full = "51908439509";
    for typed in [
        "908439509",
        "908 439 509",
        "908-439-509",
        "908.439.509",
        "(908) 439 509",
        "+51908439509",
        "+51 908 439 509",
        "0051 908 439 509",
        "51908439509",
    ] {
        let p = q(typed);
        assert!(p.phone.contains(&full.to_string()), "{typed}: {p:?}");
        assert!(p.names.is_empty());
    }
    // A Lima landline with its trunk prefix.
    assert!(q("(01) 234 5678").phone.contains(&"5112345678".to_string()));
}

#[test]
fn trailing_digits_are_looked_up_as_typed() {
    assert_eq!(q("9509").phone, ["9509"]);
    assert_eq!(q("439509").phone, ["439509"]);
    assert_eq!(q("439 509").phone, ["439509"]);
    assert_eq!(phone_suffixes("509", PE), None, "three digits are too few");
    assert_eq!(phone_suffixes("maria 9509", PE), None);
    assert_eq!(phone_suffixes("12345678901234567890", PE), None);
}

#[test]
fn the_default_country_reads_a_national_number() {
    // A Colombian mobile, typed nationally.
    let co = phone_suffixes("321 456 7890", Country::CO).unwrap();
    assert!(co.contains(&"573214567890".to_string()), "{co:?}");
    let pe = phone_suffixes("321 456 7890", PE).unwrap();
    assert!(!pe.contains(&"573214567890".to_string()));
}

#[test]
fn stored_phones_are_indexed_by_every_suffix_of_four_or_more() {
    let s = stored_phone_suffixes("+51908439509");
    assert_eq!(s.first().unwrap(), "9509");
    assert_eq!(s.last().unwrap(), "51908439509");
    assert_eq!(s.len(), 8);
    assert!(stored_phone_suffixes("+51 2").is_empty());
    // Each query form is one of the stored suffixes.
    for typed in ["908439509", "+51 908 439 509", "439509", "9509"] {
        assert!(q(typed).phone.iter().any(|p| s.contains(p)), "{typed}");
    }
}

#[test]
fn names_are_read_in_any_order_accents_and_case_ignored() {
    for typed in ["flores maria", "maria flores", "MARÍA FLÓRES", "  María,  Flores "] {
        assert_eq!(q(typed).names, ["flores", "maria"], "{typed}");
    }
    assert!(q("cita-1042").names.is_empty(), "a reference is not a name");
    assert!(q("maria 95").names.is_empty());
    assert!(PatientQuery::parse("   ", PE).is_none());
}

#[test]
fn a_name_matches_exactly_or_with_one_typo_per_word() {
    let name = "María Flores Quispe";
    assert_eq!(q("flores maria").name_closeness(name), Some(Closeness::Exact));
    assert_eq!(q("MARÍA FLÓRES").name_closeness(name), Some(Closeness::Exact));
    assert_eq!(q("marai flores").name_closeness(name), Some(Closeness::OneTypo));
    assert_eq!(q("marai florse").name_closeness(name), Some(Closeness::OneTypo));
    assert_eq!(q("amrai flores").name_closeness(name), None);
    assert_eq!(q("maria rojas").name_closeness(name), None, "every word must match");
    assert_eq!(
        q("ana flores").name_closeness("Ama Flores"),
        None,
        "no typo in three letters"
    );
    assert_eq!(q("9509").name_closeness(name), None);
}
