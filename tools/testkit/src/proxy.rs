//! A TCP proxy for failure tests: listens on `127.0.0.1:0` and forwards every connection to
//! a target, until told to fail like a network does.
//!
//! - `cut()`: every forwarded connection is closed and new ones are refused (nothing
//!   listens on the port): a link that went down, a peer that reset.
//! - `blackhole()`: connections stay open (new ones are accepted) but nothing is forwarded
//!   either way, and nothing is closed: a partition without RST, a hung host. What was sent
//!   meanwhile waits, and goes through after `heal()`, as TCP's retransmissions would.
//! - `hold_replies()`: what the client sends goes through, nothing comes back (a one-way
//!   partition): the server does the work, the client never hears of it.
//! - `reset()`: every forwarded connection is closed, what was held is dropped, and new
//!   connections are forwarded as usual (a middlebox that lost its state, a failover).
//! - `heal()`: back to forwarding (after a cut, the same port listens again).

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// How often the proxy's threads look at the mode.
const TICK: Duration = Duration::from_millis(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Forward,
    Cut,
    Blackhole,
    /// Client to target forwarded, target to client held.
    HoldReplies,
}

/// Which way a pump copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    Request,
    Reply,
}

pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<thread::JoinHandle<()>>,
}

struct Shared {
    target: SocketAddr,
    state: Mutex<State>,
    /// The accept thread holds a listener right now.
    listening: AtomicBool,
    stop: AtomicBool,
    next_id: AtomicU64,
}

struct State {
    mode: Mode,
    /// Bumped by every cut: a connection made before it is closed.
    epoch: u64,
    /// Both sides of every forwarded connection, to close them on a cut.
    conns: Vec<(u64, TcpStream)>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn mode(&self) -> (Mode, u64) {
        let s = self.state();
        (s.mode, s.epoch)
    }

    /// Waits while the proxy holds what goes `way`; false if the connection of `epoch` must
    /// end (cut since, or the proxy stopped).
    fn may_forward(&self, epoch: u64, way: Way) -> bool {
        loop {
            if self.stop.load(Ordering::SeqCst) {
                return false;
            }
            match self.mode() {
                (_, e) if e != epoch => return false,
                (Mode::Forward, _) => return true,
                (Mode::HoldReplies, _) if way == Way::Request => return true,
                (Mode::Cut, _) => return false,
                (Mode::Blackhole | Mode::HoldReplies, _) => thread::sleep(TICK),
            }
        }
    }

    fn forget(&self, id: u64) {
        self.state().conns.retain(|(i, _)| *i != id);
    }
}

impl Proxy {
    /// A proxy on a free port of 127.0.0.1 in front of `target`.
    pub fn start(target: SocketAddr) -> io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            target,
            state: Mutex::new(State {
                mode: Mode::Forward,
                epoch: 0,
                conns: Vec::new(),
            }),
            listening: AtomicBool::new(true),
            stop: AtomicBool::new(false),
            next_id: AtomicU64::new(0),
        });
        let s = Arc::clone(&shared);
        let accept = thread::Builder::new()
            .name("proxy-accept".into())
            .spawn(move || accept_loop(&s, addr, Some(listener)))?;
        Ok(Proxy {
            addr,
            shared,
            accept: Some(accept),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Closes every forwarded connection and refuses new ones, until `heal`. Returns once
    /// nothing listens on the port any more.
    pub fn cut(&self) {
        let conns = {
            let mut s = self.shared.state();
            s.mode = Mode::Cut;
            s.epoch += 1;
            std::mem::take(&mut s.conns)
        };
        for (_, c) in conns {
            let _ = c.shutdown(Shutdown::Both);
        }
        self.wait_listening(false);
    }

    /// Closes every forwarded connection (dropping what was held) and forwards new ones.
    pub fn reset(&self) {
        let conns = {
            let mut s = self.shared.state();
            s.mode = Mode::Forward;
            s.epoch += 1;
            std::mem::take(&mut s.conns)
        };
        for (_, c) in conns {
            let _ = c.shutdown(Shutdown::Both);
        }
        self.wait_listening(true);
    }

    /// Forwards nothing either way and closes nothing, until `heal`.
    pub fn blackhole(&self) {
        self.shared.state().mode = Mode::Blackhole;
        self.wait_listening(true);
    }

    /// Forwards what clients send, holds what comes back, until `heal` (or a `cut`, which
    /// drops it).
    pub fn hold_replies(&self) {
        self.shared.state().mode = Mode::HoldReplies;
        self.wait_listening(true);
    }

    /// Back to forwarding. Returns once the port listens again.
    pub fn heal(&self) {
        self.shared.state().mode = Mode::Forward;
        self.wait_listening(true);
    }

    pub fn mode(&self) -> Mode {
        self.shared.mode().0
    }

    /// Forwarded connections open right now.
    pub fn connections(&self) -> usize {
        let mut ids: Vec<u64> = self.shared.state().conns.iter().map(|(i, _)| *i).collect();
        ids.dedup();
        ids.len()
    }

    fn wait_listening(&self, want: bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.shared.listening.load(Ordering::SeqCst) != want {
            assert!(
                Instant::now() < deadline,
                "the proxy on {} did not {} in 10 s",
                self.addr,
                if want {
                    "listen again"
                } else {
                    "stop listening"
                }
            );
            thread::sleep(TICK);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let conns = std::mem::take(&mut self.shared.state().conns);
        for (_, c) in conns {
            let _ = c.shutdown(Shutdown::Both);
        }
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(shared: &Arc<Shared>, addr: SocketAddr, mut listener: Option<TcpListener>) {
    while !shared.stop.load(Ordering::SeqCst) {
        let (mode, epoch) = shared.mode();
        if mode == Mode::Cut {
            if listener.take().is_some() {
                shared.listening.store(false, Ordering::SeqCst);
            }
            thread::sleep(TICK);
            continue;
        }
        let Some(l) = &listener else {
            // The same port again (std sets SO_REUSEADDR); retried until it can be had.
            match TcpListener::bind(addr).and_then(|l| l.set_nonblocking(true).map(|()| l)) {
                Ok(l) => {
                    listener = Some(l);
                    shared.listening.store(true, Ordering::SeqCst);
                }
                Err(_) => thread::sleep(TICK),
            }
            continue;
        };
        match l.accept() {
            Ok((client, _)) => {
                let s = Arc::clone(shared);
                let _ = thread::Builder::new()
                    .name("proxy-conn".into())
                    .spawn(move || connection(&s, client, epoch));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => thread::sleep(TICK),
            Err(_) => thread::sleep(TICK),
        }
    }
}

/// One forwarded connection: the target is connected once the proxy may forward, then a
/// thread per direction.
fn connection(shared: &Arc<Shared>, client: TcpStream, epoch: u64) {
    let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
    if client.set_nonblocking(false).is_err() {
        return;
    }
    // Registered at once, so that a cut closes it even before the target is connected.
    if !register(shared, id, epoch, &client) {
        let _ = client.shutdown(Shutdown::Both);
        return;
    }
    let upstream = shared
        .may_forward(epoch, Way::Request)
        .then(|| TcpStream::connect_timeout(&shared.target, Duration::from_secs(5)).ok())
        .flatten();
    let Some(upstream) = upstream.filter(|u| register(shared, id, epoch, u)) else {
        let _ = client.shutdown(Shutdown::Both);
        shared.forget(id);
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let pumps = [
        (client.try_clone(), upstream.try_clone(), Way::Request),
        (upstream.try_clone(), client.try_clone(), Way::Reply),
    ];
    let mut threads = Vec::new();
    for (from, to, way) in pumps {
        let (Ok(from), Ok(to)) = (from, to) else {
            continue;
        };
        let s = Arc::clone(shared);
        threads.push(thread::spawn(move || pump(&s, from, to, epoch, way)));
    }
    for t in threads {
        let _ = t.join();
    }
    let _ = client.shutdown(Shutdown::Both);
    let _ = upstream.shutdown(Shutdown::Both);
    shared.forget(id);
}

/// Keeps a clone of `stream` for `cut`; false if a cut came first.
fn register(shared: &Shared, id: u64, epoch: u64, stream: &TcpStream) -> bool {
    let mut s = shared.state();
    if s.epoch != epoch || s.mode == Mode::Cut || shared.stop.load(Ordering::SeqCst) {
        return false;
    }
    match stream.try_clone() {
        Ok(c) => {
            s.conns.push((id, c));
            true
        }
        Err(_) => false,
    }
}

/// Copies `from` to `to` while the proxy forwards `way`; holds what it read while it does
/// not; ends both on end-of-file, an error or a cut.
fn pump(shared: &Shared, mut from: TcpStream, mut to: TcpStream, epoch: u64, way: Way) {
    let _ = from.set_read_timeout(Some(Duration::from_millis(20)));
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        if !shared.may_forward(epoch, way) {
            break;
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(_) => break,
        };
        if !shared.may_forward(epoch, way) || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server: every byte read is written back.
    fn echo() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                thread::spawn(move || {
                    let mut b = [0u8; 1024];
                    while let Ok(n) = s.read(&mut b) {
                        if n == 0 || s.write_all(&b[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    fn connect(p: &Proxy) -> TcpStream {
        let s = TcpStream::connect(p.addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        s
    }

    fn round_trip(s: &mut TcpStream, what: &[u8]) -> io::Result<Vec<u8>> {
        s.write_all(what)?;
        let mut b = vec![0u8; what.len()];
        s.read_exact(&mut b)?;
        Ok(b)
    }

    #[test]
    fn forwards_cuts_and_heals() {
        let p = Proxy::start(echo()).unwrap();
        let mut a = connect(&p);
        assert_eq!(round_trip(&mut a, b"hello").unwrap(), b"hello");
        p.cut();
        let mut b = [0u8; 1];
        assert!(
            matches!(a.read(&mut b), Ok(0) | Err(_)),
            "closed by the cut"
        );
        let e = TcpStream::connect(p.addr()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused, "{e}");
        p.heal();
        let mut c = connect(&p);
        assert_eq!(round_trip(&mut c, b"again").unwrap(), b"again");
    }

    #[test]
    fn a_black_hole_holds_everything_until_healed() {
        let p = Proxy::start(echo()).unwrap();
        let mut a = connect(&p);
        assert_eq!(round_trip(&mut a, b"one").unwrap(), b"one");
        p.blackhole();
        let e = round_trip(&mut a, b"two").unwrap_err();
        assert!(crate::channel::is_timeout(&e), "{e}");
        let mut fresh = connect(&p); // accepted, but nothing goes through
        let e = round_trip(&mut fresh, b"new").unwrap_err();
        assert!(crate::channel::is_timeout(&e), "{e}");
        p.heal();
        a.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut b = [0u8; 3];
        a.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"two", "held, then delivered");
        fresh
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        fresh.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"new");
    }

    #[test]
    fn held_replies_reach_the_target_but_not_the_client() {
        let target = TcpListener::bind("127.0.0.1:0").unwrap();
        let p = Proxy::start(target.local_addr().unwrap()).unwrap();
        let mut a = connect(&p);
        let (mut server, _) = target.accept().unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        p.hold_replies();
        a.write_all(b"req").unwrap();
        let mut b = [0u8; 3];
        server.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"req", "the request went through");
        server.write_all(b"rep").unwrap();
        let e = a.read_exact(&mut b).unwrap_err();
        assert!(crate::channel::is_timeout(&e), "{e}");
        p.heal();
        a.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        a.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"rep", "the reply, once healed");
        p.reset();
        assert!(
            matches!(a.read(&mut b), Ok(0) | Err(_)),
            "closed by the reset"
        );
        let mut c = connect(&p);
        let (mut server, _) = target.accept().unwrap();
        c.write_all(b"new").unwrap();
        server.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"new", "a new connection after the reset");
    }
}
