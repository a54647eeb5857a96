//! Ports for tests.

/// A port with nothing listening on it (right now).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on 127.0.0.1")
}

/// A core URL where nothing listens: connections are refused.
pub fn dead_url() -> String {
    format!("http://127.0.0.1:{}", free_port())
}
