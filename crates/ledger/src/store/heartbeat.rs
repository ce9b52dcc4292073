//! Dispatcher heartbeat rows (migration 0007): each running dispatcher
//! writes its own, everyone reads them. Rows only: whether a row stands for
//! a live dispatcher is `domain::heartbeat::Heartbeat::liveness`.

use super::{Result, Tx, ms};
use crate::domain::fault::{ChannelFault, ChannelPause};
use crate::domain::heartbeat::{DispatcherState, Heartbeat};
use crate::rows::Cols;
use chrono::{DateTime, Duration, Utc};

fn heartbeat_row(r: &dyn Cols) -> std::result::Result<Heartbeat, String> {
    Ok(Heartbeat {
        id: r.text(0)?,
        host: r.text(1)?,
        pid: u32::try_from(r.int(2)?).unwrap_or(0),
        owner: r.opt_text(3)?,
        state: r.text(4)?.parse::<DispatcherState>().map_err(|e| e.to_string())?,
        last_error: r.opt_text(5)?,
        last_error_at: r.opt_time(6)?,
        started_at: r.time(7)?,
        beat_at: r.time(8)?,
        interval: Duration::milliseconds(r.int(9)?),
        channel: match (r.text(10)?.as_str(), r.opt_text(11)?) {
            ("paused", Some(code)) => Some(ChannelPause {
                fault: code.parse::<ChannelFault>().map_err(|e| e.to_string())?,
                secret_env: r.opt_text(12)?,
            }),
            _ => None,
        },
        channel_instance: r.opt_text(13)?,
    })
}

impl Tx<'_> {
    /// Writes a dispatcher's heartbeat (its row, created on the first beat).
    /// `started_at` and the run's identity never change after the first
    /// beat.
    pub fn beat(&self, hb: &Heartbeat) -> Result<()> {
        self.db().exec(
            "INSERT INTO dispatchers(id, host, pid, owner, state, last_error, last_error_at, started_at, beat_at,
                 interval_ms, channel_state, channel_error, channel_secret_env, channel_instance)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
             ON CONFLICT(id) DO UPDATE SET state = excluded.state, last_error = excluded.last_error,
                 last_error_at = excluded.last_error_at, beat_at = excluded.beat_at,
                 interval_ms = excluded.interval_ms, channel_state = excluded.channel_state,
                 channel_error = excluded.channel_error, channel_secret_env = excluded.channel_secret_env",
            &crate::vals![
                hb.id.as_str(),
                hb.host.as_str(),
                i64::from(hb.pid),
                hb.owner.clone(),
                hb.state.as_str(),
                hb.last_error.clone(),
                hb.last_error_at.map(ms),
                ms(hb.started_at),
                ms(hb.beat_at),
                hb.interval.num_milliseconds().max(1),
                if hb.channel.is_some() { "paused" } else { "ok" },
                hb.channel.as_ref().map(|c| c.fault.as_str()),
                hb.channel.as_ref().and_then(|c| c.secret_env.clone()),
                hb.channel_instance.clone(),
            ],
        )?;
        Ok(())
    }

    /// The dispatcher rows that beat at or after `since`, the most recent
    /// beat first: older ones are long dead whatever their state says.
    pub fn heartbeats(&self, since: DateTime<Utc>) -> Result<Vec<Heartbeat>> {
        Ok(self.db().rows(
            "SELECT id, host, pid, owner, state, last_error, last_error_at, started_at, beat_at, interval_ms,
                 channel_state, channel_error, channel_secret_env, channel_instance
             FROM dispatchers WHERE beat_at >= ?1 ORDER BY beat_at DESC, id LIMIT 100",
            &crate::vals![ms(since)],
            heartbeat_row,
        )?)
    }

    /// Deletes the rows of runs that last beat before `before`; returns how
    /// many went.
    pub fn prune_heartbeats(&self, before: DateTime<Utc>) -> Result<usize> {
        Ok(self
            .db()
            .exec("DELETE FROM dispatchers WHERE beat_at < ?1", &crate::vals![ms(before)])?)
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::domain::heartbeat::{Liveness, live};
    use crate::store::Store;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 10, 12, 0, 0).unwrap()
    }

    fn hb(id: &str, state: DispatcherState, at: DateTime<Utc>) -> Heartbeat {
        Heartbeat {
            id: id.into(),
            host: "caja-2".into(),
            pid: 4242,
            owner: Some("tecnico".into()),
            state,
            last_error: None,
            last_error_at: None,
            started_at: now() - Duration::minutes(10),
            beat_at: at,
            interval: Duration::seconds(5),
            channel: None,
            channel_instance: Some("motor/i1".into()),
        }
    }

    #[test]
    fn a_beat_updates_its_own_row_and_readers_decide_liveness() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("l.db")).unwrap();
        store
            .write(|tx| {
                tx.beat(&hb("a", DispatcherState::Running, now() - Duration::seconds(60)))?;
                tx.beat(&hb("b", DispatcherState::Running, now() - Duration::seconds(60)))?;
                let mut a = hb("a", DispatcherState::Paused, now());
                a.last_error = Some("timeout".into());
                a.last_error_at = Some(now());
                // A later beat cannot rewrite who started the run, or when.
                a.started_at = now();
                a.host = "otro".into();
                tx.beat(&a)
            })
            .unwrap();
        let rows = store.read(|tx| tx.heartbeats(now() - Duration::hours(1))).unwrap();
        assert_eq!(rows.len(), 2);
        let a = &rows[0];
        assert_eq!(
            (a.id.as_str(), a.state, a.host.as_str()),
            ("a", DispatcherState::Paused, "caja-2")
        );
        assert_eq!(a.started_at, now() - Duration::minutes(10));
        assert_eq!(a.last_error.as_deref(), Some("timeout"));
        assert_eq!(a.liveness(now()), Liveness::Alive(DispatcherState::Paused));
        assert_eq!(rows[1].liveness(now()), Liveness::Gone);
        assert_eq!(live(&rows, None, now()).len(), 1);
        // Old rows are left out of the read and pruned on request.
        assert!(store.read(|tx| tx.heartbeats(now())).unwrap().len() == 1);
        let gone = store
            .write(|tx| tx.prune_heartbeats(now() - Duration::seconds(30)))
            .unwrap();
        assert_eq!(gone, 1);
        // A paused channel is stored typed and read back as it was.
        let pause = ChannelPause {
            fault: ChannelFault::CredentialRejected,
            secret_env: Some("UNAVEZ_MOTOR_API_KEY".into()),
        };
        store
            .write(|tx| {
                tx.beat(&Heartbeat {
                    channel: Some(pause.clone()),
                    ..hb("b", DispatcherState::Running, now())
                })
            })
            .unwrap();
        let rows = store.read(|tx| tx.heartbeats(now() - Duration::hours(1))).unwrap();
        let b = rows.iter().find(|r| r.id == "b").unwrap();
        assert_eq!(b.channel, Some(pause));
        store
            .write(|tx| tx.beat(&hb("b", DispatcherState::Running, now())))
            .unwrap();
        let rows = store.read(|tx| tx.heartbeats(now() - Duration::hours(1))).unwrap();
        assert_eq!(rows.iter().find(|r| r.id == "b").unwrap().channel, None, "resumed");
    }
}
