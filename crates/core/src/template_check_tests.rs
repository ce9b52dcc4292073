use super::*;
use crate::templates::{Category, Templates};

fn ours(name: &str, body: &str) -> Template {
    Template {
        name: name.into(),
        purpose: name.into(),
        category: Category::Transactional,
        language: "es_PE".into(),
        body: body.into(),
    }
}

fn meta(name: &str, language: &str, status: &str, body: &str) -> MetaTemplate {
    MetaTemplate {
        id: "1".into(),
        name: name.into(),
        language: language.into(),
        status: MetaStatus::parse(status),
        category: "UTILITY".into(),
        body: Some(body.into()),
        params: Params::of(body),
    }
}

#[test]
fn parameters_read_positional_named_and_mixed() {
    assert_eq!(
        Params::of("Hola {{1}}, {{ 3 }} {{1}} {{2}}"),
        Params::Positional(vec![1, 2, 3])
    );
    assert_eq!(Params::of("sin nada"), Params::Positional(vec![]));
    assert_eq!(
        Params::of("Hola {{nombre}} el {{fecha}} {{nombre}}"),
        Params::Named(vec!["nombre".into(), "fecha".into()])
    );
    assert!(Params::of("{{1}} {{nombre}}").is_named());
    assert_eq!(Params::of("{{1}} {{2}}").shown(), "{{1}} {{2}}");
    assert_eq!(Params::Positional(vec![]).shown(), "—");
}

#[test]
fn each_kind_of_mismatch_is_found_once() {
    let ours = vec![
        ours("ok", "Hola {{1}}"),
        ours("missing", "Hola {{1}}"),
        ours("other_lang", "Hola {{1}}"),
        ours("rejected", "Hola {{1}}"),
        ours("paused", "Hola {{1}}"),
        ours("params", "Hola {{1}}, {{2}}"),
        ours("named", "Hola {{1}}"),
        ours("text", "Hola   {{1}}."),
        ours("spaces", "Hola\n{{1}}"),
    ];
    let theirs = vec![
        meta("ok", "es_PE", "APPROVED", "Hola {{1}}"),
        meta("other_lang", "en_US", "APPROVED", "Hi {{1}}"),
        meta("other_lang", "es", "APPROVED", "Hola {{1}}"),
        meta("rejected", "es_PE", "REJECTED", "Hola {{1}}"),
        meta("paused", "es_PE", "PAUSED", "Hola {{1}}"),
        meta("params", "es_PE", "APPROVED", "Hola {{1}}"),
        meta("named", "es_PE", "APPROVED", "Hola {{nombre}}"),
        meta("text", "es_PE", "APPROVED", "Buenas {{1}}."),
        meta("spaces", "es_PE", "APPROVED", "Hola {{1}}"),
        meta("unused", "es_PE", "REJECTED", "x"),
    ];
    let found = compare(&ours, &theirs);
    let by = |n: &str| found.iter().find(|f| f.name == n).map(|f| f.problem.clone());
    assert_eq!(by("ok"), None);
    assert_eq!(by("spaces"), None, "white space is not a difference");
    assert_eq!(by("missing"), Some(Problem::Missing { languages: vec![] }));
    assert_eq!(
        by("other_lang"),
        Some(Problem::Missing {
            languages: vec!["en_US".into(), "es".into()]
        })
    );
    assert_eq!(by("rejected"), Some(Problem::NotApproved(MetaStatus::Rejected)));
    assert_eq!(by("paused"), Some(Problem::NotApproved(MetaStatus::Paused)));
    assert_eq!(
        by("params"),
        Some(Problem::ParamsDiffer {
            ours: Params::Positional(vec![1, 2]),
            theirs: Params::Positional(vec![1]),
        })
    );
    assert!(matches!(by("named"), Some(Problem::ParamsDiffer { .. })));
    assert_eq!(by("text"), Some(Problem::BodyDiffers));
    assert_eq!(by("unused"), None, "Meta's templates we do not use are not findings");
    assert_eq!(found.len(), 7);
}

const WORDS: SkeletonWords = SkeletonWords {
    header: "skeleton\nsecond line",
    purpose: "choose one of {purposes}",
    category: "Meta: {meta}",
    param: "{param} = ?",
    named: "named parameters",
};

#[test]
fn a_skeleton_holds_only_approved_templates_and_parses_back_to_them() {
    let theirs = vec![
        meta("cita", "es_PE", "APPROVED", "Hola {{1}}, \"tu\" cita\nes el {{2}}"),
        meta("malo", "es_PE", "REJECTED", "x {{1}}"),
        MetaTemplate {
            category: "MARKETING".into(),
            ..meta("promo", "es_PE", "APPROVED", "Hola {{nombre}}")
        },
    ];
    let text = skeleton(&theirs, &WORDS);
    assert!(text.starts_with("# skeleton\n# second line\n"), "{text}");
    assert!(!text.contains("malo"));
    assert!(text.contains("# {{1}} = ?\n# {{2}} = ?\n"), "{text}");
    assert!(text.contains("# Meta: UTILITY"));
    assert!(text.contains("category = \"marketing\"  # Meta: MARKETING"));
    assert!(text.contains("# named parameters"));
    assert!(text.contains("choose one of aviso-reserva, recordatorio,"));
    let parsed = Templates::parse(&text, "skeleton.toml").unwrap();
    assert_eq!(parsed.all().len(), 2);
    assert!(parsed.for_purpose("").is_none(), "no purpose assigned yet");
    assert!(compare(parsed.all(), &theirs).is_empty());
}

#[test]
fn statuses_keep_meta_s_words() {
    for w in [
        "APPROVED",
        "PENDING",
        "REJECTED",
        "PAUSED",
        "DISABLED",
        "IN_APPEAL",
        "LIMIT_EXCEEDED",
    ] {
        assert_eq!(MetaStatus::parse(w).as_str(), w);
    }
    assert_eq!(MetaStatus::parse("approved"), MetaStatus::Approved);
}
