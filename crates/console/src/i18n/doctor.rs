//! Issue 26 §1: `unavez doctor`'s report (and the console's `:doctor`),
//! each finding as a message and a fix in the configured language.

use crate::doctor::{Check, Finding, SkipReason};

use super::fill;
use super::templates::TemplateWords;

#[derive(Debug)]
pub struct DoctorWords {
    pub title: &'static str,
    pub all_ok: &'static str,
    pub some_bad: &'static str,
    pub fix: &'static str,
    /// `(message, fix)` pairs, `{…}` filled from the finding.
    pub config_ok: (&'static str, &'static str),
    pub config_invalid: (&'static str, &'static str),
    pub secrets_ok: (&'static str, &'static str),
    pub secrets_missing: (&'static str, &'static str),
    pub ledger_ok: (&'static str, &'static str),
    pub ledger_missing: (&'static str, &'static str),
    pub ledger_unreachable: (&'static str, &'static str),
    pub ledger_damaged: (&'static str, &'static str),
    pub not_wal: (&'static str, &'static str),
    pub schema_current: (&'static str, &'static str),
    pub schema_stale: (&'static str, &'static str),
    pub schema_too_new: (&'static str, &'static str),
    pub mode_ok: (&'static str, &'static str),
    pub mode_open: (&'static str, &'static str),
    pub disk_ok: (&'static str, &'static str),
    pub disk_low: (&'static str, &'static str),
    pub clock_ok: (&'static str, &'static str),
    pub clock_skewed: (&'static str, &'static str),
    pub motor_ok: (&'static str, &'static str),
    pub cloud_ok: (&'static str, &'static str),
    pub cloud_quality_low: (&'static str, &'static str),
    pub token_rejected: (&'static str, &'static str),
    pub instance_unknown: (&'static str, &'static str),
    pub instance_unlinked: (&'static str, &'static str),
    pub channel_unreachable: (&'static str, &'static str),
    pub templates_ok: (&'static str, &'static str),
    pub templates_differ: (&'static str, &'static str),
    pub templates_too_long: (&'static str, &'static str),
    pub no_waba: (&'static str, &'static str),
    pub cloud_webhook_ok: (&'static str, &'static str),
    pub cloud_webhook_public: (&'static str, &'static str),
    pub motor_webhook_ok: (&'static str, &'static str),
    pub webhook_failed: (&'static str, &'static str),
    pub listen_free: (&'static str, &'static str),
    pub listen_serving: (&'static str, &'static str),
    pub listen_busy: (&'static str, &'static str),
    pub dispatchers_alive: (&'static str, &'static str),
    pub dispatcher_stopped: (&'static str, &'static str),
    pub dispatcher_crashed: (&'static str, &'static str),
    pub other_instance: (&'static str, &'static str),
    /// "no comprobado: {why}".
    pub skipped: &'static str,
    pub skip_no_config: &'static str,
    pub skip_missing_secret: &'static str,
    pub skip_no_ledger: &'static str,
    pub skip_channel_down: &'static str,
    pub skip_not_sqlite: &'static str,
    pub skip_not_postgres: &'static str,
    pub skip_no_dispatcher: &'static str,
}

impl DoctorWords {
    /// The check's message and fix (empty when nothing is to be done).
    pub fn say(&self, c: &Check, templates: &TemplateWords) -> (String, String) {
        let f = |pair: (&str, &str), vals: &[(&str, &str)]| (fill(pair.0, vals), fill(pair.1, vals));
        match &c.finding {
            Finding::Skipped(why) => {
                let why = match why {
                    SkipReason::NoConfig => self.skip_no_config.to_string(),
                    SkipReason::MissingSecret(var) => fill(self.skip_missing_secret, &[("var", var)]),
                    SkipReason::NoLedger => self.skip_no_ledger.to_string(),
                    SkipReason::ChannelDown => self.skip_channel_down.to_string(),
                    SkipReason::NotSqlite => self.skip_not_sqlite.to_string(),
                    SkipReason::NotPostgres => self.skip_not_postgres.to_string(),
                    SkipReason::NoDispatcherYet => self.skip_no_dispatcher.to_string(),
                };
                (fill(self.skipped, &[("why", &why)]), String::new())
            }
            Finding::ConfigOk { path, timezone } => f(
                self.config_ok,
                &[("path", path.as_deref().unwrap_or("—")), ("timezone", timezone)],
            ),
            Finding::ConfigInvalid { detail } => f(self.config_invalid, &[("detail", detail)]),
            Finding::SecretsOk { vars } => f(self.secrets_ok, &[("vars", &vars.join(", "))]),
            Finding::SecretsMissing { vars } => f(self.secrets_missing, &[("vars", &vars.join(", "))]),
            Finding::LedgerOk { location, .. } => f(self.ledger_ok, &[("location", location)]),
            Finding::LedgerMissing { path } => f(self.ledger_missing, &[("path", path)]),
            Finding::LedgerUnreachable { detail } => f(self.ledger_unreachable, &[("detail", detail)]),
            Finding::LedgerDamaged { detail } => f(self.ledger_damaged, &[("detail", detail)]),
            Finding::NotWal { journal } => f(self.not_wal, &[("journal", journal)]),
            Finding::SchemaCurrent { version } => f(self.schema_current, &[("version", &version.to_string())]),
            Finding::SchemaStale { found, known } => f(
                self.schema_stale,
                &[("found", &found.to_string()), ("known", &known.to_string())],
            ),
            Finding::SchemaTooNew { found, known } => f(
                self.schema_too_new,
                &[("found", &found.to_string()), ("known", &known.to_string())],
            ),
            Finding::ModeOk { mode } => f(self.mode_ok, &[("mode", &format!("{mode:o}"))]),
            Finding::ModeOpen { mode } => f(self.mode_open, &[("mode", &format!("{mode:o}"))]),
            Finding::DiskOk { free_mb, min_mb } => f(
                self.disk_ok,
                &[("free", &free_mb.to_string()), ("min", &min_mb.to_string())],
            ),
            Finding::DiskLow { free_mb, min_mb } => f(
                self.disk_low,
                &[("free", &free_mb.to_string()), ("min", &min_mb.to_string())],
            ),
            Finding::ClockOk { skew_ms } => f(self.clock_ok, &[("ms", &skew_ms.to_string())]),
            Finding::ClockSkewed { skew_ms } => f(self.clock_skewed, &[("ms", &skew_ms.to_string())]),
            Finding::MotorOk { instance } => f(self.motor_ok, &[("instance", instance)]),
            Finding::CloudOk {
                display,
                name,
                quality,
                tier,
            } => f(
                self.cloud_ok,
                &[
                    ("display", display),
                    ("name", name),
                    ("quality", quality),
                    ("tier", tier),
                ],
            ),
            Finding::CloudQualityLow { display, quality } => {
                f(self.cloud_quality_low, &[("display", display), ("quality", quality)])
            }
            Finding::TokenRejected { var, detail } => f(self.token_rejected, &[("var", var), ("detail", detail)]),
            Finding::InstanceUnknown { instance } => f(self.instance_unknown, &[("instance", instance)]),
            Finding::InstanceUnlinked { instance } => f(self.instance_unlinked, &[("instance", instance)]),
            Finding::ChannelUnreachable { detail } => f(self.channel_unreachable, &[("detail", detail)]),
            Finding::TemplatesOk { count } => f(self.templates_ok, &[("n", &count.to_string())]),
            Finding::TemplatesDiffer { findings } => {
                let lines: Vec<String> = findings.iter().map(|x| templates.finding(x)).collect();
                f(self.templates_differ, &[("list", &lines.join("; "))])
            }
            Finding::TemplatesTooLong { names } => f(self.templates_too_long, &[("names", &names.join(", "))]),
            Finding::NoWabaId => f(self.no_waba, &[]),
            Finding::CloudWebhookOk { public_url: None } => f(self.cloud_webhook_ok, &[]),
            Finding::CloudWebhookOk { public_url: Some(u) } => f(self.cloud_webhook_public, &[("url", u)]),
            Finding::MotorWebhookOk => f(self.motor_webhook_ok, &[]),
            Finding::WebhookFailed { detail } => f(self.webhook_failed, &[("detail", detail)]),
            Finding::ListenFree { addr } => f(self.listen_free, &[("addr", addr)]),
            Finding::ListenServing { addr } => f(self.listen_serving, &[("addr", addr)]),
            Finding::ListenBusy { addr, detail } => f(self.listen_busy, &[("addr", addr), ("detail", detail)]),
            Finding::DispatchersAlive { count, instance } => f(
                self.dispatchers_alive,
                &[("n", &count.to_string()), ("instance", instance)],
            ),
            Finding::DispatcherStopped {
                host,
                pid,
                ago_s,
                crashed,
            } => f(
                if *crashed {
                    self.dispatcher_crashed
                } else {
                    self.dispatcher_stopped
                },
                &[("host", host), ("pid", &pid.to_string()), ("s", &ago_s.to_string())],
            ),
            Finding::DispatchersOtherInstance { instances } => {
                f(self.other_instance, &[("instances", &instances.join(", "))])
            }
        }
    }
}

pub static ES: DoctorWords = DoctorWords {
    title: "unavez doctor",
    all_ok: "todo en orden",
    some_bad: "hay problemas: corrija lo marcado con ✗ o ! y vuelva a ejecutar `unavez doctor`",
    fix: "cómo arreglarlo",
    config_ok: ("configuración válida ({path}); zona horaria {timezone}", ""),
    config_invalid: (
        "la configuración no es válida: {detail}",
        "corrija el archivo en el lugar indicado",
    ),
    secrets_ok: ("claves presentes: {vars}", ""),
    secrets_missing: (
        "falta la clave: {vars}",
        "exporte la variable (por ejemplo en el EnvironmentFile del servicio) y vuelva a comprobar",
    ),
    ledger_ok: ("registro accesible: {location}", ""),
    ledger_missing: ("no existe el registro {path}", "créelo con `unavez init`"),
    ledger_unreachable: (
        "no se pudo abrir el registro: {detail}",
        "revise la ruta o la URL en `database` / --db",
    ),
    ledger_damaged: (
        "el registro está dañado (quick_check): {detail}",
        "detenga el servicio y restaure la última copia de seguridad",
    ),
    not_wal: (
        "el registro no está en modo WAL (journal_mode = {journal})",
        "ábralo una vez con `unavez init`, que lo deja en WAL",
    ),
    schema_current: ("esquema al día (versión {version})", ""),
    schema_stale: (
        "esquema antiguo: versión {found}, este programa usa la {known}",
        "`unavez init` migra el registro (con el servicio detenido)",
    ),
    schema_too_new: (
        "esquema más nuevo que este programa: versión {found}, este conoce hasta la {known}",
        "instale la versión de unavez que lo creó",
    ),
    mode_ok: ("permisos del registro {mode}", ""),
    mode_open: (
        "cualquier cuenta de este equipo puede leer el registro (permisos {mode}): tiene nombres y teléfonos",
        "chmod 600 al archivo (o 660 con [storage] group)",
    ),
    disk_ok: ("espacio libre {free} MiB (mínimo {min})", ""),
    disk_low: (
        "queda poco espacio: {free} MiB libres, el mínimo es {min} ([doctor] min_free_mb)",
        "libere espacio en ese disco o mueva el registro a otro",
    ),
    clock_ok: ("reloj de la base de datos a {ms} ms de este equipo", ""),
    clock_skewed: (
        "el reloj de la base de datos difiere {ms} ms del de este equipo",
        "sincronice la hora de ambos equipos (NTP / chrony)",
    ),
    motor_ok: ("el motor responde y la instancia {instance} está vinculada", ""),
    cloud_ok: ("número {display} ({name}): calidad {quality}, límite {tier}", ""),
    cloud_quality_low: (
        "el número {display} tiene calidad {quality} en Meta: puede perder su límite de envíos",
        "revise en WhatsApp Manager qué mensajes bloquean o reportan los pacientes",
    ),
    token_rejected: (
        "token rechazado ({var}): {detail}",
        "genere un token nuevo, expórtelo en {var} y reinicie el servicio",
    ),
    instance_unknown: (
        "el motor no tiene la instancia {instance}",
        "corrija [channel.motor] instance_id con el id que muestra el motor",
    ),
    instance_unlinked: (
        "la instancia {instance} no tiene un teléfono vinculado",
        "vincule el teléfono (código QR) en el motor",
    ),
    channel_unreachable: (
        "el canal no responde: {detail}",
        "revise base_url, la red y que el servicio esté arriba",
    ),
    templates_ok: ("{n} plantilla(s) correctas", ""),
    templates_differ: (
        "plantillas que no coinciden con Meta: {list}",
        "corrija el archivo de plantillas o las plantillas en WhatsApp Manager; `unavez templates pull --out archivo` escribe las aprobadas",
    ),
    templates_too_long: (
        "plantillas que superan el límite de 4096 caracteres: {names}",
        "acorte su texto en el archivo de plantillas",
    ),
    no_waba: (
        "falta [channel.cloud] waba_id: no se pueden comprobar las plantillas",
        "agregue el id de la cuenta de WhatsApp Business (WhatsApp Manager → configuración de la cuenta)",
    ),
    cloud_webhook_ok: (
        "el webhook responde correctamente al desafío de verificación de Meta",
        "",
    ),
    cloud_webhook_public: (
        "el webhook responde correctamente al desafío de verificación de Meta",
        "configure en Meta la URL {url}/webhooks/whatsapp con el mismo token de verificación",
    ),
    motor_webhook_ok: (
        "el servidor acepta la firma hecha con la clave del webhook y rechaza una falsa",
        "",
    ),
    webhook_failed: (
        "el webhook no funcionaría: {detail}",
        "revise las claves del webhook en la configuración",
    ),
    listen_free: ("la dirección {addr} está libre para `unavez serve`", ""),
    listen_serving: ("`unavez serve` ya responde en {addr}", ""),
    listen_busy: (
        "la dirección {addr} está ocupada por otro programa: {detail}",
        "cambie [server] listen o detenga el otro programa",
    ),
    dispatchers_alive: ("{n} despachador(es) activo(s) ({instance})", ""),
    dispatcher_stopped: (
        "el despachador se detuvo hace {s} s ({host}, pid {pid}): nadie envía los avisos",
        "inicie el servicio: systemctl start unavez (o `unavez serve`)",
    ),
    dispatcher_crashed: (
        "el despachador dejó de latir hace {s} s sin despedirse ({host}, pid {pid}): se cayó o lo mataron",
        "revise el registro del servicio (journalctl -u unavez) y vuelva a iniciarlo",
    ),
    other_instance: (
        "hay despachadores enviando por otra instancia en este registro: {instances}",
        "un registro, una instancia: detenga el despachador que usa la otra",
    ),
    skipped: "no comprobado: {why}",
    skip_no_config: "la configuración no es válida",
    skip_missing_secret: "falta la clave {var}",
    skip_no_ledger: "no se pudo leer el registro",
    skip_channel_down: "el canal no respondió",
    skip_not_sqlite: "solo para un registro SQLite",
    skip_not_postgres: "solo para un registro PostgreSQL",
    skip_no_dispatcher: "ninguno ha corrido aún",
};

pub static EN: DoctorWords = DoctorWords {
    title: "unavez doctor",
    all_ok: "all good",
    some_bad: "there are problems: fix what is marked ✗ or ! and run `unavez doctor` again",
    fix: "how to fix it",
    config_ok: ("configuration valid ({path}); time zone {timezone}", ""),
    config_invalid: ("the configuration is not valid: {detail}", "fix the file where it says"),
    secrets_ok: ("secrets set: {vars}", ""),
    secrets_missing: (
        "secret missing: {vars}",
        "export the variable (e.g. in the service's EnvironmentFile) and check again",
    ),
    ledger_ok: ("ledger reachable: {location}", ""),
    ledger_missing: ("the ledger {path} does not exist", "create it with `unavez init`"),
    ledger_unreachable: (
        "could not open the ledger: {detail}",
        "check the path or URL in `database` / --db",
    ),
    ledger_damaged: (
        "the ledger is damaged (quick_check): {detail}",
        "stop the service and restore the latest backup",
    ),
    not_wal: (
        "the ledger is not in WAL mode (journal_mode = {journal})",
        "open it once with `unavez init`, which sets WAL",
    ),
    schema_current: ("schema current (version {version})", ""),
    schema_stale: (
        "old schema: version {found}, this program uses {known}",
        "`unavez init` migrates the ledger (with the service stopped)",
    ),
    schema_too_new: (
        "schema newer than this program: version {found}, it knows up to {known}",
        "install the unavez version that made it",
    ),
    mode_ok: ("ledger permissions {mode}", ""),
    mode_open: (
        "every account on this host can read the ledger (mode {mode}): it holds names and phones",
        "chmod 600 the file (or 660 with [storage] group)",
    ),
    disk_ok: ("free space {free} MiB (minimum {min})", ""),
    disk_low: (
        "low disk space: {free} MiB free, the minimum is {min} ([doctor] min_free_mb)",
        "free space on that disk or move the ledger",
    ),
    clock_ok: ("database clock {ms} ms from this host's", ""),
    clock_skewed: (
        "the database clock differs by {ms} ms from this host's",
        "synchronize both hosts' time (NTP / chrony)",
    ),
    motor_ok: ("the engine answers and instance {instance} is linked", ""),
    cloud_ok: ("number {display} ({name}): quality {quality}, limit {tier}", ""),
    cloud_quality_low: (
        "number {display} has quality {quality} at Meta: it may lose its messaging limit",
        "check in WhatsApp Manager which messages patients block or report",
    ),
    token_rejected: (
        "token rejected ({var}): {detail}",
        "create a new token, export it in {var} and restart the service",
    ),
    instance_unknown: (
        "the engine has no instance {instance}",
        "set [channel.motor] instance_id to the id the engine shows",
    ),
    instance_unlinked: (
        "instance {instance} has no linked phone",
        "link the phone (QR code) on the engine",
    ),
    channel_unreachable: (
        "the channel does not answer: {detail}",
        "check base_url, the network and that the service is up",
    ),
    templates_ok: ("{n} template(s) correct", ""),
    templates_differ: (
        "templates that do not match Meta's: {list}",
        "fix the templates file or the templates in WhatsApp Manager; `unavez templates pull --out file` writes the approved ones",
    ),
    templates_too_long: (
        "templates over the 4096-character limit: {names}",
        "shorten their text in the templates file",
    ),
    no_waba: (
        "[channel.cloud] waba_id is missing: templates cannot be checked",
        "add the WhatsApp Business Account id (WhatsApp Manager → account settings)",
    ),
    cloud_webhook_ok: ("the webhook answers Meta's verification challenge correctly", ""),
    cloud_webhook_public: (
        "the webhook answers Meta's verification challenge correctly",
        "configure {url}/webhooks/whatsapp at Meta with the same verify token",
    ),
    motor_webhook_ok: (
        "the server accepts a signature made with the webhook secret and refuses a forged one",
        "",
    ),
    webhook_failed: (
        "the webhook would not work: {detail}",
        "check the webhook secrets in the configuration",
    ),
    listen_free: ("address {addr} is free for `unavez serve`", ""),
    listen_serving: ("`unavez serve` already answers at {addr}", ""),
    listen_busy: (
        "address {addr} is taken by another program: {detail}",
        "change [server] listen or stop the other program",
    ),
    dispatchers_alive: ("{n} dispatcher(s) alive ({instance})", ""),
    dispatcher_stopped: (
        "the dispatcher stopped {s} s ago ({host}, pid {pid}): no one sends the messages",
        "start the service: systemctl start unavez (or `unavez serve`)",
    ),
    dispatcher_crashed: (
        "the dispatcher stopped beating {s} s ago without a goodbye ({host}, pid {pid}): it crashed or was killed",
        "check the service's log (journalctl -u unavez) and start it again",
    ),
    other_instance: (
        "dispatchers on this ledger send through another instance: {instances}",
        "one ledger, one instance: stop the dispatcher that uses the other",
    ),
    skipped: "not checked: {why}",
    skip_no_config: "the configuration is not valid",
    skip_missing_secret: "secret {var} is missing",
    skip_no_ledger: "the ledger could not be read",
    skip_channel_down: "the channel did not answer",
    skip_not_sqlite: "only for a SQLite ledger",
    skip_not_postgres: "only for a PostgreSQL ledger",
    skip_no_dispatcher: "none has run yet",
};
