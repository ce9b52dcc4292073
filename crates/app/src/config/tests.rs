//! The configuration file: parsing, defaults, and the checks that name
//! the file, line and field.

use super::*;

#[test]
fn the_example_file_parses() {
    let text = include_str!("../../../../config.example.toml");
    let cfg = Config::parse(text, Path::new("config.example.toml")).unwrap();
    assert_eq!(cfg.tz(), chrono_tz::America::Lima);
    assert_eq!(cfg.policy.reminder_offsets_minutes, vec![1440, 120]);
    assert_eq!(cfg.policy.max_resends_per_day, 2);
}

#[test]
fn the_resend_cap_is_read_and_checked() {
    let cfg = Config::parse("[policy]\nmax_resends_per_day = 5\n", Path::new("c.toml")).unwrap();
    assert_eq!(cfg.policy.max_resends_per_day, 5);
    assert_eq!(Config::default().policy.max_resends_per_day, 2);
    let e = Config::parse("[policy]\nmax_resends_per_day = 0\n", Path::new("c.toml")).unwrap_err();
    assert!(e.to_string().contains("policy.max_resends_per_day"), "{e}");
    let e = Config::parse("[policy]\nmax_resends_per_day = -1\n", Path::new("c.toml")).unwrap_err();
    assert!(e.to_string().starts_with("c.toml:2:"), "{e}");
}

#[test]
fn contradictions_are_refused_with_the_field() {
    let bad = [
        ("[inbound]\nconfirm = [\"SI\"]\nopt_out = [\"si\"]\n", "inbound.opt_out"),
        (
            "[inbound]\nconfirm = [\"sí\"]\nreschedule = [\"SI\"]\n",
            "inbound.reschedule",
        ),
        (
            "[[operator]]\nname = \"ana\"\nrole = \"supervisor\"\n[[operator]]\nname = \"ana\"\nrole = \"front_desk\"\n",
            "defined twice",
        ),
        (
            "[[operator]]\nname = \"ana\"\nrole = \"supervisor\"\nos_user = \"x\"\n[[operator]]\nname = \"bea\"\nrole = \"front_desk\"\nos_user = \"x\"\n",
            "operator.os_user",
        ),
        ("[server]\nbody_limit_bytes = 0\n", "server.body_limit_bytes"),
        ("[server]\nmax_connections = 0\n", "server.max_connections"),
        (
            "[server]\nbodies_in_flight_bytes = 10\n",
            "server.bodies_in_flight_bytes",
        ),
        ("[policy]\nbackoff_seconds = []\n", "policy.backoff_seconds"),
        ("[storage]\ngroup = \"\"\n", "storage.group"),
    ];
    for (text, want) in bad {
        let e = Config::parse(text, Path::new("c.toml")).unwrap_err().to_string();
        assert!(e.starts_with("c.toml: ") && e.contains(want), "{text}: {e}");
    }
    let ok = Config::parse(
        "allow_operator_flag = true\n[storage]\ngroup = \"unavez\"\n[[operator]]\nname = \"ana\"\nrole = \"supervisor\"\nos_user = \"ana\"\n",
        Path::new("c.toml"),
    )
    .unwrap();
    assert!(ok.identity_verified() && ok.allow_operator_flag);
    assert!(!Config::default().identity_verified());
    assert_eq!(Config::default().server.header_read_timeout_ms, 10_000);
}

#[test]
fn errors_name_file_line_and_field() {
    let e = Config::parse(
        "timezone = \"America/Lima\"\n[policy]\nmax_attempts = \"x\"\n",
        Path::new("c.toml"),
    )
    .unwrap_err();
    assert!(e.to_string().starts_with("c.toml:3:"), "{e}");
    let e = Config::parse("timezone = \"Mars/Olympus\"\n", Path::new("c.toml")).unwrap_err();
    assert!(e.to_string().contains("timezone"), "{e}");
    let e = Config::parse(
        "[policy]\nquiet_hours = { start = \"25:00\", end = \"07:00\" }\n",
        Path::new("c.toml"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("quiet_hours"), "{e}");
    let e = Config::parse("colour = 1\n", Path::new("c.toml")).unwrap_err();
    assert!(e.to_string().contains("colour"), "{e}");
}

#[test]
fn the_import_section_is_read_and_checked() {
    let cfg = Config::parse(
        "[import]\ndefault_country = \"co\"\nrecurrence_days = 30\nphone_properties = [\"DESCRIPTION\"]\n",
        Path::new("c.toml"),
    )
    .unwrap();
    assert_eq!(cfg.import.country(), phonenumber::country::Id::CO);
    assert_eq!((cfg.import.recurrence_days, cfg.import.phone_properties.len()), (30, 1));
    assert_eq!(Config::default().import.default_country, "PE");
    for (bad, field) in [
        ("default_country = \"XX\"", "import.default_country"),
        ("recurrence_days = 0", "import.recurrence_days"),
        ("phone_properties = [\"DTSTART\"]", "import.phone_properties"),
        ("max_days_ahead = 0", "import.max_days_ahead"),
        ("max_days_ahead = 30\nrecurrence_days = 60", "import.recurrence_days"),
    ] {
        let e = Config::parse(&format!("[import]\n{bad}\n"), Path::new("c.toml")).unwrap_err();
        assert!(e.to_string().contains(field), "{e}");
    }
}

#[test]
fn a_config_file_others_can_write_is_refused_under_strict_storage() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("unavez.toml");
    let load = |text: &str, mode: u32| {
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        Config::load(&path)
    };
    assert_eq!(Config::default().import.max_days_ahead, 400);
    assert!(!Config::default().storage.strict);
    let strict = "[storage]\nstrict = true\n";
    // Private or read-only to others: fine either way.
    assert!(load(strict, 0o600).is_ok());
    assert!(load(strict, 0o644).is_ok());
    // Writable by others: a warning only, unless strict.
    assert!(load("", 0o664).is_ok());
    assert!(load("", 0o666).is_ok());
    for mode in [0o664, 0o646, 0o666] {
        let e = load(strict, mode).unwrap_err().to_string();
        assert!(e.contains("storage.strict") && e.contains("base_url"), "{mode:o}: {e}");
        assert!(e.contains(&path.display().to_string()), "{e}");
    }
}

// tablero, themes, progress, errors
#[test]
fn the_console_theme_is_read_and_checked() {
    assert_eq!(Config::default().console.theme, Theme::Auto);
    let cfg = Config::parse("[console]\ntheme = \"light\"\n", Path::new("c.toml")).unwrap();
    assert_eq!(cfg.console.theme, Theme::Light);
    let e = Config::parse("[console]\ntheme = \"blue\"\n", Path::new("c.toml")).unwrap_err();
    // The line and the accepted values.
    assert!(
        e.to_string().starts_with("c.toml:2:") && e.to_string().contains("`light`"),
        "{e}"
    );
}
