//! A real pseudo-terminal running the built binary, and just enough of a
//! VT100 to read back what the console drew (moved here from
//! `tui_pty.rs`, so every end-to-end console test shares it).

use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, PtySize, native_pty_system};

pub const TIMEOUT: Duration = Duration::from_secs(40);

/// Just enough of a VT100 to read back what ratatui drew: printable text,
/// cursor positioning (`CSI r;c H`), clears; colours and modes are skipped.
pub fn screen(bytes: &[u8], rows: usize, cols: usize) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    let mut grid = vec![vec![' '; cols]; rows];
    let (mut r, mut c) = (0usize, 0usize);
    let mut it = text.chars().peekable();
    while let Some(ch) = it.next() {
        match ch {
            '\x1b' => match it.next() {
                Some('[') => {
                    let mut params = String::new();
                    let mut fin = ' ';
                    for x in it.by_ref() {
                        if ('\x40'..='\x7e').contains(&x) {
                            fin = x;
                            break;
                        }
                        params.push(x);
                    }
                    let nums: Vec<usize> = params
                        .trim_start_matches('?')
                        .split(';')
                        .map(|p| p.parse().unwrap_or(0))
                        .collect();
                    match fin {
                        'H' | 'f' => {
                            r = nums.first().copied().unwrap_or(1).max(1) - 1;
                            c = nums.get(1).copied().unwrap_or(1).max(1) - 1;
                        }
                        'J' if nums.first() == Some(&2) => grid = vec![vec![' '; cols]; rows],
                        // Entering the alternate screen starts from a blank one.
                        'h' if params == "?1049" => grid = vec![vec![' '; cols]; rows],
                        'K' => {
                            if let Some(line) = grid.get_mut(r) {
                                for cell in line.iter_mut().skip(c) {
                                    *cell = ' ';
                                }
                            }
                        }
                        _ => {}
                    }
                }
                Some(']') => {
                    // OSC: up to BEL.
                    for x in it.by_ref() {
                        if x == '\x07' {
                            break;
                        }
                    }
                }
                _ => {}
            },
            '\r' => c = 0,
            '\n' => r += 1,
            ch if ch >= ' ' => {
                if r < rows && c < cols {
                    grid[r][c] = ch;
                }
                c += 1;
            }
            _ => {}
        }
    }
    grid.into_iter().map(|l| l.into_iter().collect()).collect()
}

pub struct Console {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    output: Arc<Mutex<Vec<u8>>>,
}

impl Console {
    pub fn start(db: &Path, dir: &Path, operator: &str) -> Console {
        let db = db.to_str().unwrap();
        Console::spawn(&["--db", db, "tui", "--operator", operator, "--no-dispatch"], dir)
    }

    pub fn spawn(args: &[&str], dir: &Path) -> Console {
        Console::spawn_with(args, dir, &[])
    }

    /// [`Console::spawn`] with extra environment variables.
    pub fn spawn_with(args: &[&str], dir: &Path, env: &[(&str, &str)]) -> Console {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 30,
                cols: 100,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_unavez"));
        cmd.args(args);
        cmd.env("TERM", "xterm-256color");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.cwd(dir);
        let child = pair.slave.spawn_command(cmd).unwrap();
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().unwrap();
        let writer = pair.master.take_writer().unwrap();
        let output = Arc::new(Mutex::new(Vec::new()));
        let sink = output.clone();
        std::thread::spawn(move || {
            let _master = pair.master;
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Console { child, writer, output }
    }

    pub fn text(&self) -> String {
        screen(&self.output.lock().unwrap(), 30, 100).join("\n")
    }

    pub fn wait_for(&self, needle: &str) {
        let start = Instant::now();
        while start.elapsed() < TIMEOUT {
            if self.text().contains(needle) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("screen never showed {needle:?}; it shows:\n{}", self.text());
    }

    pub fn keys(&mut self, s: &str) {
        self.writer.write_all(s.as_bytes()).unwrap();
        self.writer.flush().unwrap();
    }

    /// Sends `q` and waits for a clean exit.
    pub fn quit(mut self) -> Vec<u8> {
        self.keys("q");
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "console exited with {status:?}");
                break;
            }
            assert!(start.elapsed() < TIMEOUT, "console did not quit");
            std::thread::sleep(Duration::from_millis(50));
        }
        // Let the reader drain the last bytes.
        std::thread::sleep(Duration::from_millis(200));
        self.output.lock().unwrap().clone()
    }
}

impl Drop for Console {
    /// A test that fails mid-way leaves no console running behind it.
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

impl Console {
    /// Waits until the screen no longer shows `needle`.
    pub fn wait_gone(&self, needle: &str) {
        let start = Instant::now();
        while start.elapsed() < TIMEOUT {
            if !self.text().contains(needle) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("screen kept showing {needle:?}:\n{}", self.text());
    }
}
