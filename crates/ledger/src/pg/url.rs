//! A PostgreSQL ledger's address, in either of libpq's forms: a
//! `postgres://` URL or a `key=value` connection string (`host=db
//! user=clinic dbname=unavez`). The password never comes from the
//! configuration file: it is in the setting only when the setting itself
//! came from the environment or the command line (`UNAVEZ_DB`, `--db`),
//! otherwise from `PGPASSWORD`. The address is shown without it, whatever
//! form it came in.

use std::fmt;
use std::str::FromStr;

use postgres::config::Host;

use super::PgError;

/// A parsed `postgres://` (or `postgresql://`) URL or `key=value` string.
#[derive(Clone)]
pub struct PgUrl {
    config: postgres::Config,
}

impl PgUrl {
    /// Whether `s` is a `postgres://` (or `postgresql://`) URL.
    pub fn is_url(s: &str) -> bool {
        s.starts_with("postgres://") || s.starts_with("postgresql://")
    }

    /// Whether `s` names a PostgreSQL ledger, as a URL or as a libpq
    /// `key=value` string (anything else is a SQLite path). A string with
    /// any libpq keyword followed by `=` counts, even one `postgres`
    /// would refuse: taken for a file name, it would create a database
    /// named after it, password included.
    pub fn names_postgres(s: &str) -> bool {
        Self::is_url(s) || is_key_value(s)
    }

    /// Parses `s`; without a password in it, `PGPASSWORD` is used if set.
    pub fn parse(s: &str) -> Result<PgUrl, PgError> {
        if !Self::names_postgres(s) {
            return Err(PgError::Url(format!(
                "not a PostgreSQL URL (expected postgres://user@host/database or host=… dbname=…): {}",
                redact(s)
            )));
        }
        let form = if Self::is_url(s) { "URL" } else { "connection string" };
        let mut config = postgres::Config::from_str(s).map_err(|e| {
            // The parser's own reason (`unknown option `usr``) is its source;
            // it names keys, never values.
            let why = std::error::Error::source(&e).map_or(e.to_string(), |c| format!("{e}: {c}"));
            PgError::Url(format!("invalid PostgreSQL {form} {}: {why}", redact(s)))
        })?;
        if config.get_dbname().is_none_or(str::is_empty) {
            return Err(PgError::Url(format!(
                "PostgreSQL {form} {} names no database (postgres://user@host/database, or dbname=…)",
                redact(s)
            )));
        }
        if config.get_password().is_none()
            && let Ok(p) = std::env::var("PGPASSWORD")
        {
            config.password(p);
        }
        Ok(PgUrl { config })
    }

    /// Whether the URL text carries a password (refused in a config file).
    pub fn has_password(s: &str) -> bool {
        postgres::Config::from_str(s).is_ok_and(|c| c.get_password().is_some())
    }

    pub fn config(&self) -> &postgres::Config {
        &self.config
    }

    /// The same ledger on connections the server keeps read-only: each
    /// starts with `default_transaction_read_only` on (a startup option,
    /// so it holds from the first statement), every transaction is then
    /// READ ONLY and a write is refused by the server (SQLSTATE 25006),
    /// whatever the caller's code does. `LISTEN` still works. For
    /// consoles that must not write (`tui --read-only`).
    pub fn read_only(&self) -> PgUrl {
        self.with_option(READ_ONLY_OPTION)
    }

    /// Whether connections from this URL are read-only ([`PgUrl::read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.has_option(READ_ONLY_OPTION)
    }

    /// The same ledger on connections that run every prepared statement
    /// on its generic plan (`plan_cache_mode`), for the console. Its
    /// screens are a few large statements run again and again with new
    /// times and pages: planned afresh each time (PostgreSQL's default for
    /// statements whose parameters move the estimates) the planning cost
    /// as much as running them, 2–8 ms of the Atención page at a million
    /// intentions, while the generic plan uses the same indexes. A startup
    /// option, so a reconnected console keeps it.
    pub fn generic_plans(&self) -> PgUrl {
        self.with_option(GENERIC_PLANS_OPTION)
    }

    /// Whether connections from this URL use generic plans ([`PgUrl::generic_plans`]).
    pub fn has_generic_plans(&self) -> bool {
        self.has_option(GENERIC_PLANS_OPTION)
    }

    /// The schema the connection's startup options put first on
    /// `search_path` (`options=-c search_path=clinica,public`), if any:
    /// the ledger's tables live there.
    pub fn schema(&self) -> Option<String> {
        let options = self.config.get_options()?;
        let rest = &options[options.find("search_path=")? + "search_path=".len()..];
        let first: String = rest.chars().take_while(|c| *c != ',' && !c.is_whitespace()).collect();
        let first = first.trim_matches('"');
        (!first.is_empty() && first != "public").then(|| first.to_string())
    }

    /// The `pg_dump` arguments (program name first) that back this ledger
    /// up into `file` in pg_dump's custom format (what `pg_restore`
    /// reads): host, port, user and database from the URL, the schema when
    /// the URL names one, never the password (pg_dump reads `PGPASSWORD`
    /// or `~/.pgpass`).
    pub fn pg_dump_args(&self, file: &std::path::Path) -> Vec<String> {
        let c = &self.config;
        let mut args = vec!["pg_dump".to_string(), "--format=custom".to_string()];
        match c.get_hosts().first() {
            Some(Host::Tcp(h)) => args.push(format!("--host={h}")),
            #[cfg(unix)]
            Some(Host::Unix(p)) => args.push(format!("--host={}", p.display())),
            None => {}
        }
        args.push(format!("--port={}", c.get_ports().first().copied().unwrap_or(5432)));
        if let Some(user) = c.get_user() {
            args.push(format!("--username={user}"));
        }
        args.push(format!("--dbname={}", c.get_dbname().unwrap_or("")));
        if let Some(schema) = self.schema() {
            args.push(format!("--schema={schema}"));
        }
        args.push(format!("--file={}", file.display()));
        args
    }

    fn has_option(&self, option: &str) -> bool {
        self.config.get_options().is_some_and(|o| o.contains(option))
    }

    fn with_option(&self, option: &str) -> PgUrl {
        if self.has_option(option) {
            return self.clone();
        }
        let mut config = self.config.clone();
        let options = match config.get_options() {
            Some(o) if !o.trim().is_empty() => format!("{o} {option}"),
            _ => option.to_string(),
        };
        config.options(&options);
        PgUrl { config }
    }
}

/// The startup option of [`PgUrl::read_only`].
const READ_ONLY_OPTION: &str = "-c default_transaction_read_only=on";
/// The startup option of [`PgUrl::generic_plans`].
const GENERIC_PLANS_OPTION: &str = "-c plan_cache_mode=force_generic_plan";

/// `postgres://user@host:port/db`, never the password.
impl fmt::Display for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.config;
        let user = c.get_user().unwrap_or("");
        let host = match c.get_hosts().first() {
            Some(Host::Tcp(h)) => h.clone(),
            #[cfg(unix)]
            Some(Host::Unix(p)) => p.display().to_string(),
            None => "localhost".into(),
        };
        let port = c.get_ports().first().copied().unwrap_or(5432);
        write!(f, "postgres://{user}@{host}:{port}/{}", c.get_dbname().unwrap_or(""))
    }
}

impl fmt::Debug for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PgUrl({self})")
    }
}

/// libpq's connection keywords: what a `key=value` string is made of.
const KEYWORDS: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "passfile",
    "require_auth",
    "channel_binding",
    "connect_timeout",
    "client_encoding",
    "options",
    "application_name",
    "fallback_application_name",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
    "replication",
    "gssencmode",
    "sslmode",
    "sslnegotiation",
    "requiressl",
    "sslcompression",
    "sslcert",
    "sslkey",
    "sslpassword",
    "sslcertmode",
    "sslrootcert",
    "sslcrl",
    "sslcrldir",
    "sslsni",
    "requirepeer",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
    "krbsrvname",
    "gsslib",
    "gssdelegation",
    "service",
    "target_session_attrs",
    "load_balance_hosts",
];

/// Keywords whose value is a secret.
const SECRET_KEYWORDS: &[&str] = &["password", "sslpassword"];

/// The `(keyword, value span)` pairs of a libpq `key=value` string, as
/// far as it reads as one: whitespace around `=` allowed, a value either
/// single-quoted (backslash escapes) or up to the next whitespace.
fn key_values(s: &str) -> Vec<(&str, std::ops::Range<usize>)> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let skip_ws = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        i
    };
    loop {
        i = skip_ws(i);
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        let key = &s[start..i];
        i = skip_ws(i);
        if key.is_empty() || b.get(i) != Some(&b'=') {
            return out;
        }
        i = skip_ws(i + 1);
        let value_start = i;
        if b.get(i) == Some(&b'\'') {
            i += 1;
            while i < b.len() && b[i] != b'\'' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i = (i + 1).min(b.len());
        } else {
            while i < b.len() && !b[i].is_ascii_whitespace() {
                i += 1;
            }
        }
        out.push((key, value_start..i));
    }
}

/// Whether `s` starts as a libpq `key=value` string: its first pair's key
/// is a libpq keyword. A file name (`mi clinica.db`, `/srv/a=b.db`) is not.
fn is_key_value(s: &str) -> bool {
    key_values(s).first().is_some_and(|(k, _)| KEYWORDS.contains(k))
        // Or any secret further on: never a file named after a password.
        || s.split_whitespace().any(|t| {
            SECRET_KEYWORDS.iter().any(|k| t.strip_prefix(k).is_some_and(|r| r.trim_start().starts_with('=')))
        })
}

/// The setting with any password replaced (a URL's query kept: it may
/// name the schema), for messages. A `key=value` string keeps every pair
/// but the secret ones' values.
pub fn redact(s: &str) -> String {
    if !PgUrl::is_url(s) {
        return redact_key_value(s);
    }
    match (s.find("://"), s.find('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &s[scheme + 3..at];
            match userinfo.find(':') {
                Some(colon) => format!("{}{}:***{}", &s[..scheme + 3], &userinfo[..colon], &s[at..]),
                None => s.to_string(),
            }
        }
        _ => s.to_string(),
    }
}

fn redact_key_value(s: &str) -> String {
    let mut out = s.to_string();
    // From the end, so the earlier spans stay where they are.
    for (key, span) in key_values(s).into_iter().rev() {
        if SECRET_KEYWORDS.contains(&key) {
            out.replace_range(span, "***");
        }
    }
    // Past what reads as pairs, a secret keyword may still be there.
    if SECRET_KEYWORDS
        .iter()
        .any(|k| out.contains(&format!("{k}=")) && !out.contains(&format!("{k}=***")))
    {
        return "(a connection string; not shown: it may hold a password)".into();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_paths_are_told_apart() {
        assert!(PgUrl::is_url("postgres://u@h/db"));
        assert!(PgUrl::is_url("postgresql://u@h/db"));
        assert!(!PgUrl::is_url("unavez.db"));
        assert!(!PgUrl::is_url("/var/lib/unavez/postgres.db"));
    }

    #[test]
    fn a_password_is_never_shown() {
        let u = PgUrl::parse("postgres://clinic:s3cret@db.example:6543/unavez").unwrap();
        assert_eq!(u.to_string(), "postgres://clinic@db.example:6543/unavez");
        assert!(!format!("{u:?}").contains("s3cret"));
        assert!(PgUrl::has_password("postgres://clinic:s3cret@db/unavez"));
        assert!(!PgUrl::has_password("postgres://clinic@db/unavez"));
        let e = PgUrl::parse("postgres://clinic:s3cret@db.example/")
            .err()
            .unwrap()
            .to_string();
        assert!(!e.contains("s3cret"), "{e}");
        assert!(e.contains("names no database"), "{e}");
    }

    #[test]
    fn the_pg_dump_command_names_the_ledger_but_not_the_password() {
        let u =
            PgUrl::parse("postgres://clinic:s3cret@db.example:6543/unavez?options=-c%20search_path%3Dsede_1%2Cpublic")
                .unwrap();
        assert_eq!(u.schema().as_deref(), Some("sede_1"));
        let args = u.pg_dump_args(std::path::Path::new("/srv/copias/unavez.dump"));
        assert_eq!(
            args.join(" "),
            "pg_dump --format=custom --host=db.example --port=6543 --username=clinic --dbname=unavez \
             --schema=sede_1 --file=/srv/copias/unavez.dump"
        );
        let plain = PgUrl::parse("postgres://clinic@db/unavez").unwrap();
        assert_eq!(plain.schema(), None);
        assert!(
            !plain
                .pg_dump_args(std::path::Path::new("f"))
                .iter()
                .any(|a| a.starts_with("--schema"))
        );
    }

    #[test]
    fn key_value_strings_are_read_and_their_secrets_hidden() {
        assert!(PgUrl::names_postgres("host=db dbname=x"));
        assert!(PgUrl::names_postgres("  dbname = x host=db"));
        assert!(PgUrl::names_postgres("x.db password=hunter2"));
        assert!(!PgUrl::names_postgres("mi clinica.db"));
        assert!(!PgUrl::names_postgres("/var/lib/unavez/host=1.db"));
        let u = PgUrl::parse("host=db.example port=6543 user=clinic password='it\\'s s3cret' dbname=unavez").unwrap();
        assert_eq!(u.config().get_password(), Some(&b"it's s3cret"[..]));
        assert_eq!(u.to_string(), "postgres://clinic@db.example:6543/unavez");
        let u = PgUrl::parse("host=h user=u dbname=d options='-c search_path=s1,public'").unwrap();
        assert_eq!(u.config().get_options(), Some("-c search_path=s1,public"));
        for s in [
            "host=h password=s3cret",
            "host=h password = 's3 cret' dbname=d port=x",
            "host=h user=u password=s3cret dbname=d sslmode=nope",
            "host=h bogus=1 password=s3cret dbname=d",
            "password=s3cret dbname=d bogus",
        ] {
            let e = PgUrl::parse(s).err().unwrap().to_string();
            assert!(!e.contains("s3cret") && !e.contains("s3 cret"), "{s}: {e}");
        }
        assert_eq!(
            redact("host=h password='a\\' b' sslpassword=z dbname=d"),
            "host=h password=*** sslpassword=*** dbname=d"
        );
    }

    #[test]
    fn a_read_only_url_keeps_the_other_options_and_is_shown_alike() {
        let u = PgUrl::parse("postgres://clinic@db/unavez?options=-c%20search_path%3Dsede1%2Cpublic").unwrap();
        assert!(!u.is_read_only());
        let ro = u.read_only();
        assert!(ro.is_read_only());
        assert_eq!(
            ro.config().get_options(),
            Some("-c search_path=sede1,public -c default_transaction_read_only=on")
        );
        assert_eq!(ro.to_string(), u.to_string());
        assert_eq!(ro.read_only().config().get_options(), ro.config().get_options());
        let bare = PgUrl::parse("postgres://clinic@db/unavez").unwrap().read_only();
        assert_eq!(bare.config().get_options(), Some("-c default_transaction_read_only=on"));
        // A console's read-only URL with generic plans keeps both options.
        let console = ro.generic_plans();
        assert!(console.is_read_only() && console.has_generic_plans());
        assert_eq!(
            console.generic_plans().config().get_options(),
            console.config().get_options()
        );
        assert_eq!(console.to_string(), u.to_string());
    }
}
