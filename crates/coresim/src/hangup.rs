//! Hanging up on a client without a single response byte, as a core that dies
//! mid-request would.
//!
//! tiny_http answers 500 on its own when a `Request` is dropped unanswered, so the
//! response writer is taken out first (`into_writer`). Dropping that writer shuts
//! the socket's write half down only once tiny_http has stopped reading the
//! connection, i.e. when the client sent `Connection: close`. A keep-alive client
//! (the default of most HTTP clients, ureq included) would wait until its own read
//! timeout, so the socket itself is shut down as well; tiny_http offers no handle
//! on it, hence the file-descriptor lookup below.

use std::net::SocketAddr;

use tiny_http::Request;

pub fn hang_up(request: Request, local: SocketAddr) {
    let peer = request.remote_addr().copied();
    let writer = request.into_writer();
    if let Some(peer) = peer
        && !shutdown_socket(local, peer)
    {
        log::debug!("no socket found for {peer}; relying on tiny_http to close it");
    }
    drop(writer);
}

/// Shuts down (both ways) the accepted TCP socket whose ends are `local` and `peer`.
/// Returns whether one was found. Works on any socket duplicate, since shutdown acts
/// on the connection rather than on a descriptor.
#[cfg(target_os = "linux")]
fn shutdown_socket(local: SocketAddr, peer: SocketAddr) -> bool {
    use std::fs;
    use std::net::{Shutdown, TcpStream};
    use std::os::fd::{BorrowedFd, RawFd};

    let Ok(entries) = fs::read_dir("/proc/self/fd") else {
        return false;
    };
    let mut found = false;
    for entry in entries.flatten() {
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<RawFd>().ok())
        else {
            continue;
        };
        let is_socket = fs::read_link(entry.path()).is_ok_and(|target| {
            target
                .as_os_str()
                .as_encoded_bytes()
                .starts_with(b"socket:")
        });
        if !is_socket {
            continue;
        }
        // SAFETY: the descriptor was open when listed; should another thread close it
        // meanwhile, the duplication fails (EBADF) or duplicates whatever reused the
        // number, and the address check below leaves anything foreign untouched. Only
        // our own duplicate is ever closed.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let Ok(owned) = borrowed.try_clone_to_owned() else {
            continue;
        };
        let stream = TcpStream::from(owned);
        let same_local = stream.local_addr().is_ok_and(|a| a.port() == local.port());
        if same_local && stream.peer_addr().is_ok_and(|a| a == peer) {
            found |= stream.shutdown(Shutdown::Both).is_ok();
        }
    }
    found
}

#[cfg(not(target_os = "linux"))]
fn shutdown_socket(_local: SocketAddr, _peer: SocketAddr) -> bool {
    false
}
