//! Issue 24, what careless hands do, with the real binary: a libpq
//! connection string in `UNAVEZ_DB` (PostgreSQL, never a file, its
//! password never shown) and a configuration file others can write.
//! (`/healthz` telling strangers only a code: `edges_server.rs`.)

mod edges_support;

use std::os::unix::fs::PermissionsExt;
use std::process::{Output, Stdio};
use std::str::FromStr;
use std::time::Duration;

use edges_support::{BIN, Serve, Site, wait_until};

const SECRET: &str = "Zq8-s3cr3t-pw";

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Every file under `dir`, by name.
fn files(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        out.push(e.file_name().to_string_lossy().into_owned());
        if e.file_type().unwrap().is_dir() {
            out.extend(files(&e.path()));
        }
    }
    out
}

/// The test schema's address as a libpq `key=value` string with a
/// password (the local server trusts it and ignores it).
fn key_value(schema: &unavez_testkit::PgSchema) -> String {
    let c = postgres::Config::from_str(&schema.url).unwrap();
    let host = match &c.get_hosts()[0] {
        postgres::config::Host::Tcp(h) => h.clone(),
        postgres::config::Host::Unix(p) => p.display().to_string(),
    };
    format!(
        "host={host} port={} user={} password='{SECRET}' dbname={} options='-c search_path={},public'",
        c.get_ports().first().copied().unwrap_or(5432),
        c.get_user().unwrap_or("postgres"),
        c.get_dbname().unwrap(),
        schema.name
    )
}

#[test]
fn a_connection_string_is_the_postgres_ledger_never_a_file_and_its_password_never_shows() {
    let schema = unavez_testkit::PgSchema::new();
    let kv = key_value(&schema);
    let site = Site::new("", "");
    let run = |args: &[&str]| {
        site.command(args)
            .current_dir(site.dir.path())
            .env("UNAVEZ_DB", &kv)
            .output()
            .unwrap()
    };
    let before = files(site.dir.path());

    let out = run(&["init"]);
    assert!(out.status.success(), "{}", text(&out));
    let agenda = site.path("agenda.jsonl");
    let starts = (chrono::Utc::now() + chrono::Duration::days(30)).to_rfc3339();
    std::fs::write(
        &agenda,
        format!(
            r#"{{"event_id":"e1","type":"appointment.scheduled","ref":"cita-kv","starts_at":"{starts}","contact":{{"phone":"+51987654321","name":"Ana"}}}}
"#
        ),
    )
    .unwrap();
    let mut seen = text(&out);
    let out = run(&["import", "agenda.jsonl"]);
    assert!(out.status.success(), "{}", text(&out));
    seen.push_str(&text(&out));
    let out = run(&["commitments", "list"]);
    assert!(out.status.success(), "{}", text(&out));
    seen.push_str(&text(&out));

    // serve on it: up, healthy, its start-up lines shown.
    let child = site
        .command(&["serve"])
        .current_dir(site.dir.path())
        .env("UNAVEZ_DB", &kv)
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let serve = Serve {
        child: Some(child),
        port: site.port,
    };
    assert!(
        wait_until(Duration::from_secs(30), || serve
            .get("/healthz")
            .is_some_and(|(s, _)| s == 200)),
        "serve did not become healthy on the connection string"
    );
    seen.push_str(&serve.stop());

    // A typo in the string (usr=): refused, no file, no password.
    let bad = kv.replace("user=", "usr=");
    let out = site
        .command(&["init"])
        .current_dir(site.dir.path())
        .env("UNAVEZ_DB", &bad)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("unknown option `usr`"), "{}", text(&out));
    seen.push_str(&text(&out));

    assert!(!seen.contains(SECRET), "the password was shown:\n{seen}");
    assert!(
        seen.contains("postgres://"),
        "the ledger is named as PostgreSQL:\n{seen}"
    );
    let after = files(site.dir.path());
    let new: Vec<&String> = after
        .iter()
        .filter(|f| !before.contains(f) && *f != "agenda.jsonl")
        .collect();
    assert!(new.is_empty(), "files created beside the config: {new:?}");

    // The schema is the ledger: the import's commitment is there.
    let mut c = postgres::Client::connect(&schema.url, postgres::NoTls).unwrap();
    let n: i64 = c
        .query_one("SELECT count(*) FROM commitments WHERE ref = 'cita-kv'", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 1, "the import went to the schema the string names");
}

#[test]
fn a_config_file_others_can_write_warns_and_is_refused_when_strict() {
    let site = Site::new("", "");
    site.ok(&["init"]);
    std::fs::set_permissions(&site.config, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = site.run(&["commitments", "list"]);
    assert!(out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("WARN") && err.contains("base_url") && err.contains("666"),
        "{err}"
    );

    let strict = format!(
        "{}\n[storage]\nstrict = true\n",
        std::fs::read_to_string(&site.config).unwrap()
    );
    std::fs::write(&site.config, strict).unwrap();
    for mode in [0o666, 0o664] {
        std::fs::set_permissions(&site.config, std::fs::Permissions::from_mode(mode)).unwrap();
        let out = site.run(&["serve"]);
        assert!(!out.status.success(), "{}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("storage.strict") && err.contains(&site.config.display().to_string()),
            "{err}"
        );
    }
    std::fs::set_permissions(&site.config, std::fs::Permissions::from_mode(0o640)).unwrap();
    let out = site.run(&["commitments", "list"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("base_url"));
    let _ = BIN;
}
