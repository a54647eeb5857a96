//! The HTTP channel API (CONTRACT §9): one connection's requests, in order, on the same
//! thread-per-connection model as the frames (`serve_frames`). Reading a request under the
//! timeouts is `head`; the JSON body → §2 message mapping `mapping`; the answers `answer`.
//!
//! A POST's message goes through the same `transfer::handle` as a frame's, so a GUID is one
//! ledger row whichever door it came through.

mod answer;
mod head;
mod mapping;

use std::io::{BufReader, Read, Write};
use std::time::Instant;

use self::answer::Answer;
use self::head::{BadHead, BodyLen, Head, MAX_BODY, body_len, read_body, read_head};
use crate::Shared;
use crate::accept::Door;
use crate::access_log::{log_answer, log_request, peer_label};
use crate::frames::ConnEnd;
use crate::registry::Conn;
use engine::transfer;

/// What a request needs besides its head and body: who asked, through what.
struct Ctx<'a> {
    shared: &'a Shared,
    peer: &'a str,
    channel: Option<&'a str>,
}

/// Reads requests from `reader` (over `conn`'s socket) and answers each in turn, until the
/// channel closes or asks to, a request is bad or late, the relay stops, or a reload refuses
/// the channel's certificate.
pub(crate) fn serve_http<S: Read + Write>(
    shared: &Shared,
    conn: &Conn<'_>,
    reader: &mut BufReader<S>,
) -> Result<(), ConnEnd> {
    let cfg = &shared.config;
    let peer = peer_label(conn.entry);
    let ctx = Ctx {
        shared,
        peer: &peer,
        channel: conn.channel,
    };
    let clock = conn.clock;
    loop {
        let (head, deadline) = match read_head(reader, clock, cfg.idle_timeout, cfg.frame_timeout) {
            Ok(Some(_)) if conn.refused() => return Ok(()),
            Ok(Some(read)) => read,
            Ok(None) => return Ok(()),
            Err(BadHead::End(end)) => return Err(end),
            Err(BadHead::Malformed(why)) => {
                let a = answer::problem(400, None, "malformed request line or header");
                send(shared, reader.get_mut(), &a, Framing::close())?;
                return Err(ConnEnd::BadPrefix(format!("malformed HTTP request: {why}")));
            }
            Err(BadHead::TooLarge) => {
                let a = answer::problem(431, None, "the request head is larger than 16 KiB");
                send(shared, reader.get_mut(), &a, Framing::close())?;
                return Err(ConnEnd::BadPrefix("HTTP request head too large".into()));
            }
        };
        let started = Instant::now();
        let (a, close) = match body_len(&head) {
            BodyLen::Bad => (answer::problem(400, None, "malformed Content-Length"), true),
            BodyLen::Encoded => (
                answer::problem(411, None, "a body must be sent with a Content-Length"),
                true,
            ),
            BodyLen::Length(n) if n > MAX_BODY => (
                answer::problem(413, None, "the body is larger than 16 KiB"),
                true,
            ),
            len => {
                let body = match len {
                    BodyLen::Length(n) => {
                        if n > 0 && head.expects_continue() {
                            continue_now(reader.get_mut())?;
                        }
                        Some(read_body(reader, clock, n, deadline)?)
                    }
                    _ => None,
                };
                let a = route(&ctx, &head, body.as_deref(), started);
                (a, !head.keep_alive() || shared.stopping() || conn.refused())
            }
        };
        // A HEAD's answer is its head alone (RFC 9110 §9.3.2): §9 answers it 405.
        let framing = Framing {
            close,
            body: head.method != "HEAD",
        };
        send(shared, reader.get_mut(), &a, framing)?;
        if close {
            return Ok(());
        }
    }
}

/// The interim answer a client that sent `Expect: 100-continue` waits for (curl does, for
/// bodies over 1 KiB), before it sends the body.
fn continue_now(out: &mut impl Write) -> Result<(), ConnEnd> {
    out.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
        .and_then(|()| out.flush())
        .map_err(ConnEnd::Io)
}

/// How an answer goes out: with `Connection: close`, with its body.
#[derive(Clone, Copy)]
pub(super) struct Framing {
    pub close: bool,
    pub body: bool,
}

impl Framing {
    fn close() -> Framing {
        Framing {
            close: true,
            body: true,
        }
    }
}

/// Writes `a` and counts it.
fn send(
    shared: &Shared,
    out: &mut impl Write,
    a: &Answer,
    framing: Framing,
) -> Result<(), ConnEnd> {
    let code = a
        .code
        .map_or_else(|| "-".to_string(), |c| String::from_utf8_lossy(&c).into());
    shared
        .metrics
        .http_responses
        .with_label_values(&[&a.status.to_string(), &code])
        .inc();
    a.write_to(out, framing).map_err(ConnEnd::Io)
}

/// The answer to a request whose body (`None`: it had no `Content-Length`) has been read.
fn route(ctx: &Ctx<'_>, head: &Head, body: Option<&[u8]>, started: Instant) -> Answer {
    let path = head.target.split('?').next().unwrap_or_default();
    if path == "/v1/transfers" {
        if head.method != "POST" {
            return answer::not_allowed("POST");
        }
        let Some(body) = body else {
            return answer::problem(411, None, "a POST must carry a Content-Length");
        };
        if !is_json(head) {
            return answer::problem(415, None, "the body must be application/json");
        }
        return post(ctx, head, body, started);
    }
    if let Some(guid) = path.strip_prefix("/v1/transfers/") {
        if head.method != "GET" {
            return answer::not_allowed("GET");
        }
        return get(ctx, guid);
    }
    answer::problem(404, None, "no such resource")
}

/// Exactly one `Content-Type`, `application/json` (parameters such as a charset allowed).
fn is_json(head: &Head) -> bool {
    let mut types = head.all("content-type");
    match (types.next(), types.next()) {
        (Some(v), None) => {
            let v = String::from_utf8_lossy(v);
            let media = v.split(';').next().unwrap_or_default().trim();
            media.eq_ignore_ascii_case("application/json")
        }
        _ => false,
    }
}

fn post(ctx: &Ctx<'_>, head: &Head, body: &[u8], started: Instant) -> Answer {
    let msg = mapping::idempotency_key(head)
        .map_err(|detail| mapping::Malformed { guid: None, detail })
        .and_then(|guid| mapping::message(&guid, body));
    let msg = match msg {
        Ok(msg) => msg,
        Err(bad) => {
            let m = &ctx.shared.metrics;
            m.request(&wire::E_MALFORMED, ctx.channel, Door::Http.as_str());
            let guid = bad.guid.as_deref().unwrap_or("-");
            let took = started.elapsed();
            let who = (ctx.peer, ctx.channel, took, Door::Http);
            log_answer(guid, &wire::E_MALFORMED, "-", Some(&bad.detail), who);
            return answer::problem(400, Some(wire::E_MALFORMED), &bad.detail);
        }
    };
    let shared = ctx.shared;
    let handled = transfer::handle_in(
        shared.store.as_ref(),
        &shared.core,
        &shared.events,
        shared.recovery.mode(),
        ctx.channel,
        &msg,
    );
    shared
        .metrics
        .request(&handled.code, ctx.channel, Door::Http.as_str());
    log_request(
        &handled,
        ctx.peer,
        ctx.channel,
        started.elapsed(),
        Door::Http,
    );
    answer::transfer(&handled)
}

/// What the ledger knows of `guid`, shown only to the channel that may use the row.
fn get(ctx: &Ctx<'_>, guid: &str) -> Answer {
    if !wire::valid_guid(guid.as_bytes()) {
        return answer::no_row();
    }
    match ctx.shared.store.read(guid) {
        Ok(Some(row)) => match row.channel.as_deref() {
            Some(owner) if ctx.channel != Some(owner) => answer::no_row(),
            _ => answer::row(&row),
        },
        Ok(None) => answer::no_row(),
        Err(e) => {
            log::warn!(guid; "cannot read the ledger: {e}");
            answer::ledger_unreadable()
        }
    }
}
