//! Round trips and statements per message, counted on the client side of
//! the wire (issue 29: scaling out must not cost more per message).
//!
//! The shared server does not preload `pg_stat_statements`, and the
//! dispatchers are other processes, so the bench stands between them and
//! the server: a TCP relay on loopback that forwards every byte both ways
//! and reads the frontend messages of the PostgreSQL protocol as they pass.
//! A round trip ends at each `Sync` (extended protocol) or simple `Query`,
//! where the server answers `ReadyForQuery`; a statement is each `Execute`
//! or simple `Query`.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context as _;

/// What passed through the relay so far.
#[derive(Default)]
pub struct Counts {
    round_trips: AtomicU64,
    statements: AtomicU64,
    connections: AtomicU64,
}

/// A snapshot of [`Counts`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Seen {
    pub round_trips: u64,
    pub statements: u64,
    pub connections: u64,
}

impl std::ops::Sub for Seen {
    type Output = Seen;
    fn sub(self, o: Seen) -> Seen {
        Seen {
            round_trips: self.round_trips - o.round_trips,
            statements: self.statements - o.statements,
            connections: self.connections - o.connections,
        }
    }
}

/// The relay: listens on loopback, forwards to the server of a URL.
pub struct Relay {
    pub port: u16,
    counts: Arc<Counts>,
}

impl Relay {
    /// Starts relaying to `url`'s server (threads that live as long as the
    /// bench process; connections end when their client does).
    pub fn start(url: &str) -> anyhow::Result<Relay> {
        let (host, port) = server_of(url);
        let target = format!("{host}:{port}");
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let counts = Arc::new(Counts::default());
        let c = counts.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(&target) else {
                    continue;
                };
                c.connections.fetch_add(1, Ordering::Relaxed);
                let c = c.clone();
                std::thread::spawn(move || relay(client, server, &c));
            }
        });
        Ok(Relay { port, counts })
    }

    pub fn seen(&self) -> Seen {
        Seen {
            round_trips: self.counts.round_trips.load(Ordering::Relaxed),
            statements: self.counts.statements.load(Ordering::Relaxed),
            connections: self.counts.connections.load(Ordering::Relaxed),
        }
    }

    /// `url` pointed at the relay instead of its server.
    pub fn url(&self, url: &str) -> anyhow::Result<String> {
        let scheme_end = url.find("://").context("a postgres:// URL")? + 3;
        let auth_end = url[scheme_end..].find('/').map_or(url.len(), |i| scheme_end + i);
        let host_start = url[scheme_end..auth_end]
            .rfind('@')
            .map_or(scheme_end, |i| scheme_end + i + 1);
        Ok(format!(
            "{}127.0.0.1:{}{}",
            &url[..host_start],
            self.port,
            &url[auth_end..]
        ))
    }
}

/// Host and port of a `postgres://user@host:port/db` URL.
fn server_of(url: &str) -> (String, u16) {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let auth = rest.split(['/', '?']).next().unwrap_or("");
    let hostport = auth.rsplit_once('@').map_or(auth, |(_, h)| h);
    match hostport.rsplit_once(':') {
        Some((h, p)) => (h.to_string(), p.parse().unwrap_or(5432)),
        None => (
            if hostport.is_empty() { "127.0.0.1" } else { hostport }.to_string(),
            5432,
        ),
    }
}

fn relay(mut client: TcpStream, mut server: TcpStream, counts: &Counts) {
    let (Ok(mut client_r), Ok(mut server_w)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    std::thread::scope(|s| {
        s.spawn(move || {
            let _ = std::io::copy(&mut server, &mut client);
            let _ = client.shutdown(Shutdown::Both);
        });
        let mut parser = Frontend::default();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match client_r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            parser.feed(&buf[..n], counts);
            if server_w.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = server_w.shutdown(Shutdown::Both);
    });
}

/// The frontend message framing: untyped start-up messages first (an SSL
/// or GSS request is followed by another), then type byte + length.
#[derive(Default)]
struct Frontend {
    started: bool,
    header: Vec<u8>,
    /// Bytes of the current message's body still to skip.
    skip: usize,
}

const SSL_REQUEST: u32 = 80_877_103;
const GSS_REQUEST: u32 = 80_877_104;

impl Frontend {
    fn feed(&mut self, mut bytes: &[u8], counts: &Counts) {
        while !bytes.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                bytes = &bytes[n..];
                continue;
            }
            let need = if self.started { 5 } else { 8 };
            let n = (need - self.header.len()).min(bytes.len());
            self.header.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if self.header.len() < need {
                return;
            }
            if self.started {
                let len = u32::from_be_bytes([self.header[1], self.header[2], self.header[3], self.header[4]]);
                match self.header[0] {
                    b'Q' => {
                        counts.round_trips.fetch_add(1, Ordering::Relaxed);
                        counts.statements.fetch_add(1, Ordering::Relaxed);
                    }
                    b'S' => {
                        counts.round_trips.fetch_add(1, Ordering::Relaxed);
                    }
                    b'E' => {
                        counts.statements.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {}
                }
                self.skip = (len as usize).saturating_sub(4);
            } else {
                let len = u32::from_be_bytes([self.header[0], self.header[1], self.header[2], self.header[3]]);
                let code = u32::from_be_bytes([self.header[4], self.header[5], self.header[6], self.header[7]]);
                self.started = code != SSL_REQUEST && code != GSS_REQUEST;
                self.skip = (len as usize).saturating_sub(8);
            }
            self.header.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_syncs_queries_and_executes_across_reads() {
        let counts = Counts::default();
        let mut f = Frontend::default();
        let mut wire = Vec::new();
        // Start-up: length 8 + code 196608 (3.0), no parameters.
        wire.extend_from_slice(&8u32.to_be_bytes());
        wire.extend_from_slice(&196_608u32.to_be_bytes());
        for m in [b'P', b'B', b'E', b'S', b'Q'] {
            wire.push(m);
            wire.extend_from_slice(&7u32.to_be_bytes());
            wire.extend_from_slice(b"abc");
        }
        for chunk in wire.chunks(3) {
            f.feed(chunk, &counts);
        }
        assert_eq!(counts.round_trips.load(Ordering::Relaxed), 2);
        assert_eq!(counts.statements.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn the_url_points_at_the_relay() {
        let r = Relay {
            port: 4242,
            counts: Arc::default(),
        };
        assert_eq!(
            r.url("postgres://postgres@127.0.0.1:5432/db?options=x").unwrap(),
            "postgres://postgres@127.0.0.1:4242/db?options=x"
        );
        assert_eq!(server_of("postgres://u:p@h:6543/db"), ("h".to_string(), 6543));
    }
}
