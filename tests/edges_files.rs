//! Issue 11, files and people: private ledger files, a shared group, no
//! database at a mistyped path, serve and tui refusing a damaged or
//! read-only ledger, operator identity from the OS account.

mod edges_support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::Command;
use std::time::Duration;

use edges_support::{BIN, Site, mode, uid, wait_until};
use unavez::store::Store;

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn account() -> (String, String) {
    let run = |a: &str| {
        let o = Command::new("id").arg(a).output().unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    (run("-un"), run("-gn"))
}

#[test]
fn the_ledger_its_wal_and_shm_and_rejects_files_are_private() {
    let site = Site::new("", "");
    site.ok(&["init"]);
    assert_eq!(mode(&site.db), 0o600);
    // While serve runs, the -wal and -shm files exist: same mode.
    let serve = site.serve();
    for suffix in ["-wal", "-shm"] {
        let p = std::path::PathBuf::from(format!("{}{suffix}", site.db.display()));
        assert!(wait_until(Duration::from_secs(5), || p.exists()), "{suffix}");
        assert_eq!(mode(&p), 0o600, "{suffix}");
    }
    serve.stop();
    let csv = site.path("agenda.csv");
    std::fs::write(
        &csv,
        "ref,starts_at,phone,name,service,location,status\ncita-1,2031-01-01T10:00:00-05:00,987,Ana,X,Y,scheduled\n",
    )
    .unwrap();
    let out = site.run(&["import", csv.to_str().unwrap(), "--skip-invalid"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let rejects = std::fs::read_dir(site.dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("rejected"))
        .expect("a rejects file");
    assert_eq!(mode(&rejects), 0o600);
    assert!(
        rejects.to_string_lossy().ends_with("agenda.rejected.csv"),
        "{}",
        rejects.display()
    );
    // Re-importable as it is: the header is there, the reasons are
    // comments, the same row is refused for the same field.
    let text = std::fs::read_to_string(&rejects).unwrap();
    assert!(text.starts_with("ref,starts_at,phone"), "{text}");
    let out = site.run(&["import", rejects.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["rejected"][0]["field"], "phone", "{v}");

    // An existing ledger readable by others is warned about.
    std::fs::set_permissions(&site.db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = site.run(&["intents", "list"]);
    assert!(out.status.success());
    assert!(stderr(&out).contains("readable by every account"), "{}", stderr(&out));
}

#[test]
fn a_storage_group_shares_the_ledger_0660() {
    let (_, group) = account();
    let site = Site::new("", &format!("[storage]\ngroup = \"{group}\"\n"));
    site.ok(&["init"]);
    assert_eq!(mode(&site.db), 0o660);
    let gid = Command::new("id").arg("-g").output().unwrap();
    let gid: u32 = String::from_utf8_lossy(&gid.stdout).trim().parse().unwrap();
    assert_eq!(std::fs::metadata(&site.db).unwrap().gid(), gid);

    let bad = Site::new("", "[storage]\ngroup = \"no-such-group-unavez\"\n");
    let out = bad.run(&["init"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("storage.group"), "{}", stderr(&out));
}

#[test]
fn read_only_commands_never_create_a_ledger_at_a_mistyped_path() {
    let site = Site::new("", "");
    site.ok(&["init"]);
    let typo = site.path("unavze.db");
    for args in [
        vec!["intents", "list"],
        vec!["commitments", "list"],
        vec!["intents", "show", "x"],
        vec!["dispatch"],
        vec!["tui", "--operator", "recepcion"],
    ] {
        let mut full = vec!["--db", typo.to_str().unwrap()];
        full.extend(args.iter().copied());
        let out = site.run(&full);
        assert!(!out.status.success(), "{args:?}");
        assert!(
            stderr(&out).contains("no existe el registro"),
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(!typo.exists(), "{args:?} created {}", typo.display());
    }
}

#[test]
fn serve_and_tui_refuse_a_damaged_ledger() {
    let site = Site::new("", "");
    site.ok(&["init"]);
    // Overwrite a few pages past the schema page with noise.
    let mut bytes = std::fs::read(&site.db).unwrap();
    assert!(bytes.len() > 8 * 4096, "{}", bytes.len());
    for b in &mut bytes[4 * 4096..7 * 4096] {
        *b = 0xA5;
    }
    std::fs::write(&site.db, &bytes).unwrap();
    for args in [vec!["serve"], vec!["tui", "--operator", "recepcion"]] {
        let out = site.run(&args);
        assert!(!out.status.success(), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.contains("quick_check") || err.contains("malformed"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn serve_and_tui_refuse_a_read_only_ledger() {
    let site = Site::new("", "");
    site.ok(&["init"]);
    std::fs::set_permissions(&site.db, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(site.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&site.config, std::fs::Permissions::from_mode(0o644)).unwrap();
    for args in [vec!["serve"], vec!["tui", "--operator", "recepcion"]] {
        // root writes anything: run as an unprivileged account then.
        let out = if uid() == 0 {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=65534", "--regid=65534", "--clear-groups", BIN])
                .arg("--config")
                .arg(&site.config)
                .args(&args)
                .env("UNAVEZ_TEST_MOTOR_KEY", "clave")
                .env_remove("UNAVEZ_DB")
                .env_remove("UNAVEZ_CONFIG");
            c.output().unwrap()
        } else {
            site.run(&args)
        };
        assert!(!out.status.success(), "{args:?}");
        let err = stderr(&out);
        assert!(err.contains("read-only") || err.contains("readonly"), "{args:?}: {err}");
    }
}

#[test]
fn identity_comes_from_the_os_account_once_operators_are_mapped() {
    let (me, _) = account();
    let people = format!(
        "[[operator]]\nname = \"tecnica\"\nrole = \"technician\"\nos_user = \"{me}\"\n\
         [[operator]]\nname = \"supervisora\"\nrole = \"supervisor\"\nos_user = \"unavez-nobody-else\"\n"
    );
    let site = Site::new("", &people);
    site.ok(&["init"]);
    let day = chrono::Utc::now().format("%Y-%m-%d").to_string();
    // No --operator: the account decides.
    let out = site.run(&["reprocess", "--day", &day, "--reason", "prueba", "--dry-run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Naming someone else is refused, and recorded.
    let out = site.run(&["intents", "resend", "x", "--operator", "supervisora", "--reason", "y"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("no es usted"), "{}", stderr(&out));
    let out = site.run(&["reprocess", "--day", &day, "--reason", "x", "--operator", "supervisora"]);
    assert!(!out.status.success());
    // Every command-line twin of a console action follows the same rule.
    for twin in [
        vec!["intents", "cancel", "x"],
        vec!["intents", "verify", "x", "--outcome", "received"],
        vec!["intents", "contact", "x"],
        vec!["intents", "resolve", "x"],
    ] {
        let args: Vec<&str> = twin
            .iter()
            .copied()
            .chain(["--operator", "supervisora", "--reason", "y"])
            .collect();
        let out = site.run(&args);
        assert_eq!(out.status.code(), Some(3), "{twin:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("no es usted"), "{twin:?}: {}", stderr(&out));
    }
    let mut store = Store::open(&site.db).unwrap();
    let actions = store.read(|tx| tx.operator_actions(20)).unwrap();
    let refused: Vec<_> = actions
        .iter()
        .filter(|a| a.result == "refused" && a.scope.as_deref() == Some("identity"))
        .collect();
    assert_eq!(refused.len(), 6, "{actions:?}");
    assert!(refused.iter().all(|a| a.operator == "supervisora"));
    assert!(refused[0].detail.as_deref().unwrap_or("").contains(&me));

    // With allow_operator_flag, the flag may name someone else.
    let open = Site::new("", &format!("allow_operator_flag = true\n{people}"));
    open.ok(&["init"]);
    let out = open.run(&[
        "reprocess",
        "--day",
        &day,
        "--reason",
        "x",
        "--dry-run",
        "--operator",
        "tecnica",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Identity matters only where operators are mapped to OS accounts and this
/// session's is not: then `?` help says so once, and the header never does
/// (issue 25 §5: no false alarm in red on every console).
#[test]
fn help_says_when_identity_is_not_verified_and_the_header_never_does() {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use unavez::config::Role;
    use unavez::tui::app::App;
    use unavez::tui::keys::{Access, Mode};
    let t = unavez::i18n::strings(unavez::config::Language::Es);
    let mut app = App::new(
        t,
        "recepcion",
        Access {
            role: Role::FrontDesk,
            read_only: false,
        },
        chrono_tz::America::Lima,
        chrono::Utc::now(),
    );
    let render = |app: &App| {
        let mut term = Terminal::new(TestBackend::new(100, 30)).unwrap();
        term.draw(|f| unavez::tui::view::draw(f, app)).unwrap();
        let buf = term.backend().buffer().clone();
        (0..30)
            .map(|y| (0..100).map(|x| buf[(x, y)].symbol().to_string()).collect::<String>())
            .collect::<Vec<_>>()
    };
    app.mode = Mode::Help;
    assert!(!render(&app).concat().contains("identidad no verificada"));
    app.identity_unverified = true;
    let screen = render(&app);
    assert!(!screen[0].contains("identidad no verificada"), "{}", screen[0]);
    assert!(
        screen.concat().contains("identidad no verificada"),
        "{}",
        screen.join("\n")
    );
}
