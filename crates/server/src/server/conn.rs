//! The connection layer under the router: hyper's HTTP/1 server with a cap
//! on connections, a header read timeout and an idle keep-alive timeout
//! (`[server]` in the config; docs/operations.md, "HTTP limits").
//!
//! `axum::serve` exposes none of hyper's settings, so connections are
//! accepted here and served with `hyper::server::conn::http1`. hyper runs
//! its header clock whenever a connection waits for a request head,
//! including between requests on a kept-alive connection; the per-connection
//! [`Clock`] given to it as its timer makes that one clock mean two
//! things: a new connection (or a request whose first byte arrived) has
//! `header_read_timeout` to finish its headers, an idle kept-alive one has
//! `idle_timeout` before its next request starts.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use hyper::rt::{Sleep, Timer};
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::config::ServerConfig;

/// File descriptors kept for the ledger, logs and the engine client when
/// the connection cap is fitted under the process's open-file limit.
const FD_RESERVE: usize = 64;

/// The connection-level settings.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_connections: usize,
}

impl ConnLimits {
    /// From `[server]`, with the connection cap lowered under the
    /// process's open-file limit when that is smaller: accepting past it
    /// fails with EMFILE and starves every endpoint.
    pub fn from_config(cfg: &ServerConfig) -> ConnLimits {
        let mut max = cfg.max_connections;
        if let Some(files) = open_file_limit() {
            let fit = files.saturating_sub(FD_RESERVE).max(1);
            if fit < max {
                tracing::warn!(
                    max_connections = max,
                    open_file_limit = files,
                    "server.max_connections is above what the open-file limit allows; serving at most {fit} connections"
                );
                max = fit;
            }
        }
        ConnLimits {
            header_read_timeout: Duration::from_millis(cfg.header_read_timeout_ms),
            idle_timeout: Duration::from_millis(cfg.idle_timeout_ms),
            max_connections: max,
        }
    }
}

/// The soft `Max open files` of this process (Linux), without libc.
fn open_file_limit() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Accepts and serves connections until `stop` is cancelled, then lets the
/// open ones finish their request in flight.
pub async fn serve(listener: TcpListener, app: Router, limits: ConnLimits, stop: CancellationToken) -> io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    loop {
        // Past the cap, connections wait in the kernel's backlog instead
        // of each taking a descriptor and a task.
        let slot = tokio::select! {
            _ = stop.cancelled() => break,
            s = slots.clone().acquire_owned() => s.map_err(io::Error::other)?,
        };
        let accepted = tokio::select! {
            _ = stop.cancelled() => break,
            r = listener.accept() => r,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // EMFILE and friends are transient: keep serving the
                // connections we have and try again shortly.
                tracing::warn!(error = %e, "cannot accept a connection; retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let clock = Clock::new(limits);
        let io = TokioIo::new(Watched {
            inner: stream,
            clock: clock.clone(),
        });
        let service = {
            let clock = clock.clone();
            let app = app.clone();
            hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                clock.head_received();
                // Who is asking, for the routes that answer loopback
                // callers more (`/healthz`).
                req.extensions_mut().insert(axum::extract::ConnectInfo(peer));
                let mut app = app.clone();
                // The router is always ready (axum documents it).
                tower_service::Service::call(&mut app, req)
            })
        };
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(clock)
            .header_read_timeout(limits.header_read_timeout)
            .serve_connection(io, service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "connection closed with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// One connection's view of time: where its current wait for a request
/// head started and whether bytes of that head have arrived.
#[derive(Clone)]
struct Clock {
    inner: Arc<ClockState>,
}

struct ClockState {
    limits: ConnLimits,
    origin: Instant,
    /// A request head has been received on this connection already (so a
    /// wait for the next one is keep-alive idle time).
    served: AtomicBool,
    /// Waiting for a request head.
    awaiting: AtomicBool,
    /// When the first byte of the awaited head arrived, in ms since
    /// `origin` plus one (0: none yet).
    first_byte: AtomicU64,
}

impl Clock {
    fn new(limits: ConnLimits) -> Clock {
        Clock {
            inner: Arc::new(ClockState {
                limits,
                origin: Instant::now(),
                served: AtomicBool::new(false),
                awaiting: AtomicBool::new(false),
                first_byte: AtomicU64::new(0),
            }),
        }
    }

    fn head_received(&self) {
        self.inner.awaiting.store(false, Ordering::SeqCst);
        self.inner.served.store(true, Ordering::SeqCst);
    }

    fn bytes_read(&self) {
        let s = &self.inner;
        if s.awaiting.load(Ordering::SeqCst) && s.first_byte.load(Ordering::SeqCst) == 0 {
            let ms = s.origin.elapsed().as_millis() as u64 + 1;
            let _ = s.first_byte.compare_exchange(0, ms, Ordering::SeqCst, Ordering::SeqCst);
        }
    }

    /// The deadline of a wait for a head that started at `start`.
    fn deadline(&self, start: Instant) -> Instant {
        let s = &self.inner;
        if !s.served.load(Ordering::SeqCst) {
            return start + s.limits.header_read_timeout;
        }
        match s.first_byte.load(Ordering::SeqCst) {
            0 => start + s.limits.idle_timeout,
            ms => s.origin + Duration::from_millis(ms - 1) + s.limits.header_read_timeout,
        }
    }
}

impl Timer for Clock {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        self.sleep_until(Instant::now() + duration)
    }

    /// hyper asks for a sleep only for its header read timeout, at the
    /// moment it starts waiting for a request head.
    fn sleep_until(&self, _deadline: Instant) -> Pin<Box<dyn Sleep>> {
        let start = Instant::now();
        self.inner.first_byte.store(0, Ordering::SeqCst);
        self.inner.awaiting.store(true, Ordering::SeqCst);
        let deadline = self.deadline(start);
        Box::pin(HeadWait {
            clock: self.clone(),
            start,
            sleep: Box::pin(tokio::time::sleep_until(deadline.into())),
        })
    }
}

/// hyper's header timer: its deadline moves from the idle limit to the
/// header limit when the first byte of a request arrives (hyper polls it
/// again after every read).
struct HeadWait {
    clock: Clock,
    start: Instant,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl Sleep for HeadWait {}

impl Future for HeadWait {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let deadline = tokio::time::Instant::from(self.clock.deadline(self.start));
        if self.sleep.deadline() != deadline {
            self.sleep.as_mut().reset(deadline);
        }
        self.sleep.as_mut().poll(cx)
    }
}

/// The socket, telling the [`Clock`] when bytes arrive.
struct Watched {
    inner: TcpStream,
    clock: Clock,
}

impl AsyncRead for Watched {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.clock.bytes_read();
        }
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
