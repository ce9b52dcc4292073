//! `unavez ledger backup` and `unavez ledger restore` in the configured
//! language: what they did, and why they refused (`{name}` placeholders,
//! filled with [`super::fill`]).

use crate::config::Language;

#[derive(Debug)]
pub struct BackupWords {
    /// `{path} {bytes} {n} {version}`
    pub taken: &'static str,
    /// `{path}`
    pub pruned: &'static str,
    /// `{ledger} {command}`
    pub postgres: &'static str,
    /// `{ledger} {detail}`
    pub damaged: &'static str,
    /// `{ledger} {src} {n} {version} {migrated}`
    pub restored: &'static str,
    pub migrated: &'static str,
    /// `{path}`
    pub moved_aside: &'static str,
    /// `{ledger} {host} {pid} {at}`
    pub in_use: &'static str,
    /// `{ledger}`
    pub writing: &'static str,
    /// `{src} {found} {known}`
    pub too_new: &'static str,
    /// `{src} {detail}`
    pub src_damaged: &'static str,
    /// `{src}`
    pub not_a_ledger: &'static str,
    /// `{src}`
    pub missing: &'static str,
    /// `{src} {why}`
    pub unreadable: &'static str,
    /// `{ledger}`
    pub restore_postgres: &'static str,
}

pub static ES: BackupWords = BackupWords {
    taken: "copia {path} ({bytes} bytes, {n} intenciones, esquema {version}): quick_check ok, modo 0600",
    pruned: "  borrada la copia anterior {path}",
    postgres: "{ledger} es un registro PostgreSQL, que unavez no copia: respáldelo con pg_dump (la contraseña, de PGPASSWORD o ~/.pgpass; se restaura con pg_restore): {command}",
    damaged: "la copia de {ledger} no pasa PRAGMA quick_check ({detail}); se borró, el registro no cambió",
    restored: "restaurado {ledger} desde {src} ({n} intenciones, esquema {version}{migrated})",
    migrated: ", migrado a esta versión",
    moved_aside: "  apartado {path}",
    in_use: "hay un despachador en marcha sobre {ledger} (host {host}, pid {pid}, último latido {at}): detenga `unavez serve` (systemctl stop unavez) y las consolas antes de restaurar; no se cambió nada",
    writing: "otro proceso está escribiendo en {ledger} (una importación, una consola): deténgalo antes de restaurar; no se cambió nada",
    too_new: "{src} tiene la versión de esquema {found}, más nueva que este unavez ({known}): restáurela con el unavez que la hizo, o actualice; no se cambió nada",
    src_damaged: "{src} no pasa PRAGMA quick_check ({detail}): elija otra copia; no se cambió nada",
    not_a_ledger: "{src} no es un registro de unavez (no tiene versión de esquema): no se cambió nada",
    missing: "no existe la copia {src}",
    unreadable: "{src} no se puede leer como registro ({why}): no se cambió nada",
    restore_postgres: "{ledger} es un registro PostgreSQL: restáurelo con pg_restore desde un archivo de pg_dump (unavez solo restaura archivos SQLite)",
};

pub static EN: BackupWords = BackupWords {
    taken: "backup {path} ({bytes} bytes, {n} intentions, schema {version}): quick_check ok, mode 0600",
    pruned: "  deleted older backup {path}",
    postgres: "{ledger} is a PostgreSQL ledger, which unavez does not copy: back it up with pg_dump (the password from PGPASSWORD or ~/.pgpass; restore with pg_restore): {command}",
    damaged: "the copy of {ledger} fails PRAGMA quick_check ({detail}); it was deleted, the ledger is unchanged",
    restored: "restored {ledger} from {src} ({n} intentions, schema {version}{migrated})",
    migrated: ", migrated to this version",
    moved_aside: "  moved aside {path}",
    in_use: "a dispatcher is running on {ledger} (host {host}, pid {pid}, last beat {at}): stop `unavez serve` (systemctl stop unavez) and the consoles before restoring; nothing was changed",
    writing: "another process is writing {ledger} (an import, a console): stop it before restoring; nothing was changed",
    too_new: "{src} has schema version {found}, newer than this unavez ({known}): restore it with the unavez that made it, or upgrade; nothing was changed",
    src_damaged: "{src} fails PRAGMA quick_check ({detail}): choose another backup; nothing was changed",
    not_a_ledger: "{src} is not an unavez ledger (no schema version): nothing was changed",
    missing: "no backup at {src}",
    unreadable: "{src} cannot be read as a ledger ({why}): nothing was changed",
    restore_postgres: "{ledger} is a PostgreSQL ledger: restore it with pg_restore from a pg_dump file (unavez restores SQLite files only)",
};

/// The words for a configured language.
pub fn words(lang: Language) -> &'static BackupWords {
    match lang {
        Language::Es => &ES,
        Language::En => &EN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placeholders(s: &str) -> Vec<&str> {
        let mut v: Vec<&str> = s
            .split('{')
            .skip(1)
            .filter_map(|p| p.split_once('}').map(|(name, _)| name))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn both_languages_fill_the_same_placeholders() {
        let pairs = |w: &'static BackupWords| {
            [
                w.taken,
                w.pruned,
                w.postgres,
                w.damaged,
                w.restored,
                w.migrated,
                w.moved_aside,
                w.in_use,
                w.writing,
                w.too_new,
                w.src_damaged,
                w.not_a_ledger,
                w.missing,
                w.unreadable,
                w.restore_postgres,
            ]
        };
        for (es, en) in pairs(&ES).into_iter().zip(pairs(&EN)) {
            assert_eq!(placeholders(es), placeholders(en), "{es} / {en}");
        }
        assert!(words(Language::Es).in_use.contains("no se cambió nada"));
    }
}
