//! The channels of a round: each on its own connection, sending new transfers and resends of
//! GUIDs already sent (this round's and earlier ones'), and what every GUID was answered. A
//! channel stops at its first connection error (the relay was killed, or lost the power).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use testkit::Chan;
use wire::Transfer;

/// What the channels know of a GUID.
#[derive(Debug, Clone)]
pub struct Known {
    pub msg: Vec<u8>,
    /// The round it was first sent in.
    pub round: u64,
    /// The `0000` reply a channel got for it, if any: every later one must be the same bytes.
    pub ok_reply: Option<Vec<u8>>,
}

/// Every GUID sent so far, and the violations the channels saw themselves.
#[derive(Default)]
pub struct Book {
    pub known: BTreeMap<String, Known>,
    pub violations: Vec<String>,
}

pub type Shared = Arc<Mutex<Book>>;

pub fn lock(b: &Shared) -> std::sync::MutexGuard<'_, Book> {
    b.lock().unwrap_or_else(|e| e.into_inner())
}

/// The message of a new transfer.
pub fn new_msg(guid: &str, amount: u64) -> Vec<u8> {
    wire::encode_request(&Transfer {
        guid: guid.into(),
        from_account: "00000000000001".into(),
        to_account: "00000000000002".into(),
        amount,
        memo: String::new(),
    })
    .expect("a valid request")
}

/// Records `reply` to `guid`'s message in round `round`: a `0000` must repeat any earlier
/// `0000` byte for byte.
pub fn record(book: &Shared, round: u64, guid: &str, reply: &[u8]) {
    if !is_ok(reply) {
        return;
    }
    let mut b = lock(book);
    let Some(k) = b.known.get_mut(guid) else {
        return;
    };
    match &k.ok_reply {
        None => k.ok_reply = Some(reply.to_vec()),
        Some(before) if before == reply => {}
        Some(_) => {
            let v = format!("round {round}: {guid}: two different 0000 replies");
            b.violations.push(v);
        }
    }
}

/// Whether a reply's code is `0000`.
pub fn is_ok(reply: &[u8]) -> bool {
    wire::parse_reply(reply).is_ok_and(|r| r.code == "0000")
}

/// One channel: until `stop` or its first error, a new GUID (3 in 5) or a resend.
pub fn channel(
    addr: String,
    book: Shared,
    round: u64,
    id: u64,
    seed: u64,
    stop: Arc<AtomicBool>,
) -> u64 {
    let mut rng = fastrand::Rng::with_seed(seed);
    let Ok(mut chan) = Chan::connect(addr.as_str(), Duration::from_secs(5)) else {
        return 0;
    };
    let mut sent = 0;
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let (guid, msg) = if rng.u8(0..5) < 3 || lock(&book).known.is_empty() {
            n += 1;
            let guid = format!("PL-{round}-{id}-{n}");
            let msg = new_msg(&guid, rng.u64(1..100_000));
            lock(&book).known.insert(
                guid.clone(),
                Known {
                    msg: msg.clone(),
                    round,
                    ok_reply: None,
                },
            );
            (guid, msg)
        } else {
            let b = lock(&book);
            let i = rng.usize(0..b.known.len());
            let (g, k) = b.known.iter().nth(i).expect("in range");
            (g.clone(), k.msg.clone())
        };
        match chan.call(&msg) {
            Ok(reply) => record(&book, round, &guid, &reply),
            Err(_) => break,
        }
        sent += 1;
    }
    sent
}
