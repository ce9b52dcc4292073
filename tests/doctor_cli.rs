//! `unavez doctor` as a real process against `unavez sim` (engine and
//! `--cloud`), on a real SQLite ledger (issue 26 §1): a fresh install is
//! all ok or skip and exits 0; each provoked failure fails its check with
//! a Spanish fix and turns the checks that depend on it to skip.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use chrono::{Duration, Utc};
use serde_json::Value;
use unavez::domain::heartbeat::{DispatcherState, Heartbeat};

struct Sim {
    child: Child,
    base: String,
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sim(args: &[&str], env: &[(&str, &str)]) -> Sim {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_unavez"));
    cmd.args(["sim", "--listen", "127.0.0.1:0"]).args(args);
    cmd.env_remove("UNAVEZ_MOTOR_API_KEY").env_remove("UNAVEZ_CLOUD_TOKEN");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line.trim().strip_prefix("listening on ").unwrap().to_string();
    Sim {
        child,
        base: format!("http://{addr}"),
    }
}

/// A free loopback port for `[server] listen`.
fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

struct Install {
    dir: tempfile::TempDir,
    db: PathBuf,
    cfg: PathBuf,
}

impl Install {
    fn new(config: &str) -> Install {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("unavez.db");
        let cfg = dir.path().join("unavez.toml");
        std::fs::write(&cfg, config).unwrap();
        let i = Install { dir, db, cfg };
        let o = i.run(&[], &["init"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        i
    }

    fn run(&self, env: &[(&str, &str)], args: &[&str]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_unavez"));
        cmd.arg("--config").arg(&self.cfg).arg("--db").arg(&self.db).args(args);
        for v in [
            "UNAVEZ_MOTOR_API_KEY",
            "UNAVEZ_MOTOR_WEBHOOK_SECRET",
            "UNAVEZ_CLOUD_TOKEN",
            "UNAVEZ_CLOUD_APP_SECRET",
            "UNAVEZ_CLOUD_VERIFY_TOKEN",
            "UNAVEZ_DB",
            "UNAVEZ_CONFIG",
        ] {
            cmd.env_remove(v);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    /// `doctor --json`: exit code and each check by id.
    fn doctor(&self, env: &[(&str, &str)]) -> (i32, HashMap<String, (String, String, String)>) {
        let o = self.run(env, &["doctor", "--json"]);
        let v: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: {}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        });
        let checks = v
            .iter()
            .map(|c| {
                let s = |k: &str| c[k].as_str().unwrap().to_string();
                (s("id"), (s("status"), s("message"), s("fix")))
            })
            .collect();
        (o.status.code().unwrap(), checks)
    }
}

const MOTOR_ENV: [(&str, &str); 2] = [
    ("UNAVEZ_MOTOR_API_KEY", "clave"),
    ("UNAVEZ_MOTOR_WEBHOOK_SECRET", "firma"),
];

fn motor_config(sim: &Sim, extra: &str) -> String {
    format!(
        "{extra}\n[channel.motor]\nbase_url = \"{}\"\ninstance_id = \"i1\"\n[server]\nlisten = \"{}\"\n",
        sim.base,
        free_addr()
    )
}

fn status(checks: &HashMap<String, (String, String, String)>, id: &str) -> String {
    checks
        .get(id)
        .map(|c| c.0.clone())
        .unwrap_or_else(|| panic!("no check {id}: {checks:?}"))
}

fn assert_all_ok_or_skip(code: i32, checks: &HashMap<String, (String, String, String)>) {
    for (id, (s, m, _)) in checks {
        assert!(s == "ok" || s == "skip", "{id}: {s} {m}");
    }
    assert_eq!(code, 0, "{checks:?}");
}

#[test]
fn a_fresh_engine_install_is_ok_and_each_failure_says_its_fix() {
    let engine = sim(&["--instance", "i1"], &[("UNAVEZ_MOTOR_API_KEY", "clave")]);
    let i = Install::new(&motor_config(&engine, ""));
    let (code, checks) = i.doctor(&MOTOR_ENV);
    assert_all_ok_or_skip(code, &checks);
    assert_eq!(checks["dispatchers"].1, "no comprobado: ninguno ha corrido aún");
    assert_eq!(checks.len(), 12, "{checks:?}");
    // The server's own handler accepted the secret's signature and refused
    // a forged one.
    assert_eq!(status(&checks, "webhooks"), "ok");
    assert!(
        checks["webhooks"].1.contains("rechaza una falsa"),
        "{:?}",
        checks["webhooks"]
    );

    // Missing secret: its check fails naming the variable (never a value);
    // the channel is skipped with the reason.
    let (code, checks) = i.doctor(&[("UNAVEZ_MOTOR_WEBHOOK_SECRET", "firma")]);
    assert_eq!(code, 3);
    assert_eq!(status(&checks, "secrets"), "fail");
    assert!(checks["secrets"].1.contains("UNAVEZ_MOTOR_API_KEY"));
    assert!(checks["secrets"].2.contains("exporte la variable"));
    assert_eq!(status(&checks, "channel"), "skip");
    assert_eq!(
        checks["channel"].1,
        "no comprobado: falta la clave UNAVEZ_MOTOR_API_KEY"
    );

    // Wrong key: "token rechazado", with the variable and the fix.
    let (code, checks) = i.doctor(&[
        ("UNAVEZ_MOTOR_API_KEY", "otra"),
        ("UNAVEZ_MOTOR_WEBHOOK_SECRET", "firma"),
    ]);
    assert_eq!(code, 3);
    assert_eq!(status(&checks, "channel"), "fail");
    assert!(
        checks["channel"]
            .1
            .starts_with("token rechazado (UNAVEZ_MOTOR_API_KEY)"),
        "{:?}",
        checks["channel"]
    );
    assert!(checks["channel"].2.contains("genere un token nuevo"));
    assert!(!checks["channel"].1.contains("otra"), "never the secret");

    // World-readable ledger.
    std::fs::set_permissions(&i.db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, checks) = i.doctor(&MOTOR_ENV);
    assert_eq!(code, 3);
    assert_eq!(status(&checks, "ledger_file"), "fail");
    assert!(checks["ledger_file"].2.contains("chmod 600"));
    std::fs::set_permissions(&i.db, std::fs::Permissions::from_mode(0o600)).unwrap();

    // A dead dispatcher: it beat, then stopped beating without a goodbye.
    let now = Utc::now();
    let mut store = unavez::store::Store::open(&i.db).unwrap();
    let beat = |id: &str, ago_s: i64, instance: &str| Heartbeat {
        id: id.into(),
        host: "caja".into(),
        pid: 4242,
        owner: None,
        state: DispatcherState::Running,
        last_error: None,
        last_error_at: None,
        started_at: now - Duration::hours(1),
        beat_at: now - Duration::seconds(ago_s),
        interval: Duration::seconds(5),
        channel: None,
        channel_instance: Some(instance.into()),
    };
    store.write(|tx| tx.beat(&beat("d1", 300, "motor/i1"))).unwrap();
    let (code, checks) = i.doctor(&MOTOR_ENV);
    assert_eq!(code, 3);
    assert_eq!(status(&checks, "dispatchers"), "fail");
    assert!(
        checks["dispatchers"].1.contains("sin despedirse"),
        "{:?}",
        checks["dispatchers"]
    );
    assert!(checks["dispatchers"].2.contains("journalctl"));

    // Alive, and a second one sending through another instance: a warning.
    store
        .write(|tx| {
            tx.beat(&beat("d2", 0, "motor/i1"))?;
            tx.beat(&beat("d3", 0, "motor/otra"))
        })
        .unwrap();
    let (code, checks) = i.doctor(&MOTOR_ENV);
    assert_eq!(code, 3);
    assert_eq!(status(&checks, "dispatchers"), "warn");
    assert!(checks["dispatchers"].1.contains("motor/otra"));
    drop(store);

    // Stale schema: `unavez init` migrates; what reads rows is skipped.
    let conn = rusqlite::Connection::open(&i.db).unwrap();
    conn.pragma_update(None, "user_version", 12).unwrap();
    drop(conn);
    let (code, checks) = i.doctor(&MOTOR_ENV);
    assert_eq!(code, 3);
    assert_eq!(status(&checks, "schema"), "fail");
    assert!(
        checks["schema"].2.contains("`unavez init` migra"),
        "{:?}",
        checks["schema"]
    );
    assert_eq!(checks["dispatchers"].1, "no comprobado: no se pudo leer el registro");
}

#[test]
fn low_disk_and_a_missing_ledger_fail_with_their_fix() {
    let engine = sim(&[], &[]);
    let i = Install::new(&motor_config(&engine, "[doctor]\nmin_free_mb = 999999999"));
    let (code, checks) = i.doctor(&MOTOR_ENV);
    assert_eq!(code, 3);
    assert_eq!(status(&checks, "disk"), "fail");
    assert!(checks["disk"].1.contains("min_free_mb"), "{:?}", checks["disk"]);
    std::fs::remove_file(&i.db).unwrap();
    let (code, checks) = i.doctor(&MOTOR_ENV);
    assert_eq!(code, 3);
    assert_eq!(status(&checks, "ledger"), "fail");
    assert!(checks["ledger"].2.contains("unavez init"));
    assert_eq!(status(&checks, "schema"), "skip");
    assert!(!i.db.exists(), "doctor never creates a ledger");
    // A configuration that does not parse is a failed check, not a crash.
    std::fs::write(&i.cfg, "timezone = \"Marte/Olimpo\"\n").unwrap();
    let (code, checks) = i.doctor(&MOTOR_ENV);
    assert_eq!(code, 3);
    assert_eq!(status(&checks, "config"), "fail");
    assert!(checks["config"].1.contains("Marte/Olimpo"));
    assert_eq!(status(&checks, "channel"), "skip");
    let _ = i.dir.path();
}

fn cloud_config(sim: &Sim, templates: Option<&Path>) -> String {
    let t = templates
        .map(|p| format!("templates = {:?}\n", p.display().to_string()))
        .unwrap_or_default();
    format!(
        "{t}[channel]\nkind = \"cloud\"\n[channel.cloud]\nbase_url = \"{}\"\nphone_number_id = \"1234567890\"\nwaba_id = \"555000\"\n[server]\nlisten = \"{}\"\npublic_url = \"https://clinica.example\"\n",
        sim.base,
        free_addr()
    )
}

const CLOUD_ENV: [(&str, &str); 3] = [
    ("UNAVEZ_CLOUD_TOKEN", "tok"),
    ("UNAVEZ_CLOUD_APP_SECRET", "app"),
    ("UNAVEZ_CLOUD_VERIFY_TOKEN", "verificar"),
];

#[test]
fn a_fresh_cloud_install_is_ok_and_a_rejected_token_skips_the_templates() {
    let meta = sim(&["--cloud", "--page-size", "5"], &[("UNAVEZ_CLOUD_TOKEN", "tok")]);
    let i = Install::new(&cloud_config(&meta, None));
    let (code, checks) = i.doctor(&CLOUD_ENV);
    assert_all_ok_or_skip(code, &checks);
    assert!(
        checks["channel"].1.contains("calidad GREEN, límite TIER_1K"),
        "{:?}",
        checks["channel"]
    );
    assert!(
        checks["webhooks"]
            .2
            .contains("https://clinica.example/webhooks/whatsapp")
    );

    let (code, checks) = i.doctor(&[
        ("UNAVEZ_CLOUD_TOKEN", "caducado"),
        ("UNAVEZ_CLOUD_APP_SECRET", "app"),
        ("UNAVEZ_CLOUD_VERIFY_TOKEN", "verificar"),
    ]);
    assert_eq!(code, 3);
    assert_eq!(status(&checks, "channel"), "fail");
    assert!(
        checks["channel"].1.starts_with("token rechazado (UNAVEZ_CLOUD_TOKEN)"),
        "{:?}",
        checks["channel"]
    );
    assert_eq!(checks["templates"].1, "no comprobado: el canal no respondió");
}

#[test]
fn rejected_and_mismatched_templates_fail_the_cloud_check() {
    let meta = sim(&["--cloud"], &[]);
    let dir = tempfile::tempdir().unwrap();
    let mine = dir.path().join("plantillas.toml");
    std::fs::write(
        &mine,
        "[[template]]\nname = \"promo_descuento\"\npurpose = \"aviso-reserva\"\ncategory = \"marketing\"\nlanguage = \"es_PE\"\nbody = \"Hola {{1}}, este mes tienes 20% de descuento en {{2}}.\"\n\n\
         [[template]]\nname = \"pedido_pagado\"\npurpose = \"pagado\"\ncategory = \"transactional\"\nlanguage = \"es_PE\"\nbody = \"Hola {{1}}, recibimos el pago.\"\n",
    )
    .unwrap();
    let i = Install::new(&cloud_config(&meta, Some(&mine)));
    let (code, checks) = i.doctor(&CLOUD_ENV);
    assert_eq!(code, 3);
    assert_eq!(status(&checks, "templates"), "fail");
    let m = &checks["templates"].1;
    assert!(
        m.contains("promo_descuento (es_PE): Meta la tiene como REJECTED"),
        "{m}"
    );
    assert!(
        m.contains("pedido_pagado (es_PE): parámetros distintos: aquí {{1}}, en Meta {{1}} {{2}}"),
        "{m}"
    );
    assert!(checks["templates"].2.contains("unavez templates pull"));
}

#[test]
fn a_postgresql_ledger_reports_its_schema_and_clock() {
    let schema = unavez_testkit::PgSchema::new();
    let engine = sim(&[], &[]);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("unavez.toml");
    std::fs::write(&cfg, motor_config(&engine, "")).unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_unavez"))
            .arg("--config")
            .arg(&cfg)
            .arg("--db")
            .arg(&schema.url)
            .args(args)
            .envs(MOTOR_ENV)
            .env_remove("UNAVEZ_DB")
            .output()
            .unwrap()
    };
    // Before `init`: the schema is missing, which `unavez init` makes.
    let o = run(&["init"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(&["doctor", "--json"]);
    let v: Vec<Value> =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    let by = |id: &str| v.iter().find(|c| c["id"] == id).unwrap().clone();
    assert_eq!(by("ledger")["status"], "ok", "{v:?}");
    assert_eq!(by("schema")["status"], "ok", "{v:?}");
    assert!(matches!(by("clock")["status"].as_str(), Some("ok" | "warn")), "{v:?}");
    assert!(by("clock")["message"].as_str().unwrap().contains("ms"));
    assert_eq!(by("ledger_file")["status"], "skip");
    assert_eq!(by("disk")["message"], "no comprobado: solo para un registro SQLite");
    assert_eq!(by("dispatchers")["status"], "skip");
    assert_eq!(o.status.code(), Some(0), "{v:?}");
}
