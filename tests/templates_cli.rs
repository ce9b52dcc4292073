//! `unavez sim --cloud` as Meta's Graph API, and `unavez templates check`
//! and `pull` against it, all as real processes (issue 26 §2): the rejected,
//! paused and mismatched templates are found, pagination and named
//! parameters are covered, and a pulled skeleton passes the check.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::{Value, json};

const TOKEN: &str = "tok-bueno";

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

fn cloud_sim(extra: &[&str]) -> Sim {
    let mut child = Command::new(env!("CARGO_BIN_EXE_unavez"))
        .args(["sim", "--cloud", "--listen", "127.0.0.1:0", "--page-size", "4"])
        .args(extra)
        .env("UNAVEZ_CLOUD_TOKEN", TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    Sim {
        child,
        base: format!("http://{addr}"),
    }
}

fn config(dir: &Path, sim: &Sim, templates: Option<&Path>) -> PathBuf {
    let p = dir.join("unavez.toml");
    let templates = templates
        .map(|t| format!("templates = {:?}\n", t.display().to_string()))
        .unwrap_or_default();
    std::fs::write(
        &p,
        format!(
            "{templates}[channel]\nkind = \"cloud\"\n[channel.cloud]\nbase_url = \"{}\"\nphone_number_id = \"1234567890\"\nwaba_id = \"555000\"\n",
            sim.base
        ),
    )
    .unwrap();
    p
}

fn unavez(cfg: &Path, token: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_unavez"))
        .args(args)
        .env("UNAVEZ_CONFIG", cfg)
        .env("UNAVEZ_CLOUD_TOKEN", token)
        .env_remove("UNAVEZ_DB")
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[tokio::test]
async fn the_cloud_sim_answers_graph_reads_in_meta_s_shapes() {
    let sim = cloud_sim(&[]);
    let http = reqwest::Client::new();
    let phone: Value = http
        .get(format!(
            "{}/v21.0/1234567890?fields=display_phone_number,quality_rating,messaging_limit_tier",
            sim.base
        ))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(phone["id"], "1234567890");
    assert_eq!(phone["quality_rating"], "GREEN");
    assert_eq!(phone["messaging_limit_tier"], "TIER_1K");
    assert!(phone["display_phone_number"].is_string());
    assert!(phone.get("verified_name").is_none(), "only the fields asked for");

    // Every page through `paging.next`, as Graph gives it.
    let mut url = format!("{}/v21.0/555000/message_templates", sim.base);
    let mut names = Vec::new();
    let mut pages = 0;
    loop {
        let page: Value = http
            .get(&url)
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        pages += 1;
        let data = page["data"].as_array().unwrap();
        assert!(data.len() <= 4);
        names.extend(data.iter().map(|t| t["name"].as_str().unwrap().to_string()));
        assert!(page["paging"]["cursors"]["before"].is_string());
        assert!(page["paging"]["cursors"]["after"].is_string());
        match page["paging"]["next"].as_str() {
            Some(n) => url = n.to_string(),
            None => break,
        }
    }
    assert_eq!(names.len(), 15, "{names:?}");
    assert_eq!(pages, 4);
    names.dedup();
    assert_eq!(names.len(), 15, "no template twice across pages");

    // A rejected token: 401 with Graph's OAuthException 190.
    let r = http
        .get(format!("{}/v21.0/1234567890", sim.base))
        .bearer_auth("otro")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], 190);
    assert_eq!(e["error"]["type"], "OAuthException");
}

#[test]
fn check_passes_on_the_embedded_set_and_finds_each_mismatch() {
    let sim = cloud_sim(&[]);
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), &sim, None);
    let o = unavez(&cfg, TOKEN, &["templates", "check"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("todas coinciden con Meta"), "{}", text(&o));

    let mine = dir.path().join("mine.toml");
    std::fs::write(
        &mine,
        r#"
[[template]]
name = "cita_reserva"
purpose = "aviso-reserva"
category = "transactional"
language = "es_PE"
body = "Hola {{1}}, tu cita de {{2}} quedó reservada para el {{3}} a las {{4}}."

[[template]]
name = "promo_descuento"
purpose = "x1"
category = "marketing"
language = "es_PE"
body = "Hola {{1}}, este mes tienes 20% de descuento en {{2}}."

[[template]]
name = "encuesta_satisfaccion"
purpose = "x2"
category = "transactional"
language = "es_PE"
body = "Hola {{1}}, ¿cómo fue tu atención de {{2}}? Responde del 1 al 5."

[[template]]
name = "cita_confirmada"
purpose = "x3"
category = "transactional"
language = "es_PE"
body = "Hola {{1}}, confirmamos tu cita de {{2}} el {{3}}."

[[template]]
name = "cita_cambio"
purpose = "aviso-cambio"
category = "transactional"
language = "en_US"
body = "Hi {{1}}"
"#,
    )
    .unwrap();
    let cfg = config(dir.path(), &sim, Some(&mine));
    let o = unavez(&cfg, TOKEN, &["templates", "check", "--json"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["configured"], 5);
    assert_eq!(report["at_meta"], 15, "every page was read");
    let problem = |name: &str| {
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .map(|f| {
                (
                    f["problem"].as_str().unwrap().to_string(),
                    f["message"].as_str().unwrap().to_string(),
                )
            })
            .unwrap_or_else(|| panic!("no finding for {name}: {report}"))
    };
    let (p, m) = problem("cita_reserva");
    assert_eq!(p, "params_differ");
    assert!(
        m.contains("aquí {{1}} {{2}} {{3}} {{4}}, en Meta {{1}} {{2}} {{3}} {{4}} {{5}}"),
        "{m}"
    );
    let (p, m) = problem("promo_descuento");
    assert_eq!(p, "not_approved");
    assert!(m.contains("REJECTED"), "{m}");
    let (p, m) = problem("encuesta_satisfaccion");
    assert_eq!(p, "not_approved");
    assert!(m.contains("PAUSED"), "{m}");
    let (p, m) = problem("cita_confirmada");
    assert_eq!(p, "params_differ", "positional here, named at Meta");
    assert!(m.contains("{{nombre}} {{servicio}} {{fecha}}"), "{m}");
    let (p, m) = problem("cita_cambio");
    assert_eq!(p, "missing");
    assert!(m.contains("sí en: es_PE"), "{m}");
    assert_eq!(report["findings"].as_array().unwrap().len(), 5);

    // A rejected token is said as such, in Spanish, with the variable.
    let o = unavez(&cfg, "caducado", &["templates", "check"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("token rechazado por Meta (UNAVEZ_CLOUD_TOKEN)"),
        "{}",
        text(&o)
    );
    assert!(!text(&o).contains("caducado"), "never the token itself");
}

#[test]
fn a_pulled_skeleton_passes_the_check_and_an_existing_file_is_only_diffed() {
    // Meta's templates from a file: named parameters, and more than a page.
    let dir = tempfile::tempdir().unwrap();
    let mut meta: Vec<Value> = (1..=6)
        .map(|i| {
            json!({"name": format!("aviso_{i}"), "language": "es_PE", "status": "APPROVED", "category": "UTILITY",
                   "id": format!("{i}"), "parameter_format": "POSITIONAL",
                   "components": [{"type": "BODY", "text": format!("Aviso {i} para {{{{1}}}} el {{{{2}}}}."),
                                   "example": {"body_text": [["Ana", "lunes"]]}}]})
        })
        .collect();
    meta.push(
        json!({"name": "con_nombres", "language": "es", "status": "APPROVED", "category": "MARKETING",
        "id": "7", "parameter_format": "NAMED",
        "components": [{"type": "HEADER", "format": "TEXT", "text": "Hola"},
                       {"type": "BODY", "text": "Hola {{nombre}}, \"gracias\" por tu visita del {{fecha}}.",
                        "example": {"body_text_named_params": [{"param_name": "nombre", "example": "Ana"},
                                                               {"param_name": "fecha", "example": "lunes"}]}},
                       {"type": "FOOTER", "text": "Clínica"}]}),
    );
    meta.push(
        json!({"name": "rechazada", "language": "es", "status": "REJECTED", "category": "UTILITY", "id": "8",
        "components": [{"type": "BODY", "text": "x {{1}}"}]}),
    );
    let meta_file = dir.path().join("meta.json");
    std::fs::write(&meta_file, serde_json::to_string(&meta).unwrap()).unwrap();
    let sim = cloud_sim(&["--cloud-templates", meta_file.to_str().unwrap()]);

    let out = dir.path().join("plantillas.toml");
    let cfg = config(dir.path(), &sim, None);
    let o = unavez(&cfg, TOKEN, &["templates", "pull", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("7 plantilla(s) aprobada(s)"), "{}", text(&o));
    let written = std::fs::read_to_string(&out).unwrap();
    assert!(written.contains("name = \"con_nombres\""), "{written}");
    assert!(written.contains("# {{nombre}}: ¿qué dato va aquí?"), "{written}");
    assert!(written.contains("category = \"marketing\"  # categoría en Meta: MARKETING"));
    assert!(written.contains("# purpose = \"\"  # elija uno: aviso-reserva"));
    assert!(!written.contains("rechazada"), "only approved templates");

    // The skeleton, as the configured templates, passes the check.
    let cfg = config(dir.path(), &sim, Some(&out));
    let o = unavez(&cfg, TOKEN, &["templates", "check"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));

    // An edited file is shown as a diff and kept without --write.
    let edited = written.replacen(
        "# purpose = \"\"  # elija uno",
        "purpose = \"aviso-reserva\"  # elija uno",
        1,
    );
    std::fs::write(&out, &edited).unwrap();
    let o = unavez(&cfg, TOKEN, &["templates", "pull", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("-purpose = \"aviso-reserva\""), "{}", text(&o));
    assert!(text(&o).contains("--write"), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), edited);
    let o = unavez(
        &cfg,
        TOKEN,
        &["templates", "pull", "--out", out.to_str().unwrap(), "--write"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), written);
}
