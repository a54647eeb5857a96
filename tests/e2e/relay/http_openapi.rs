//! docs/openapi.yaml against the relay's real answers: every status, content type and
//! header an answer carries is described for its path and method, and its body fits the
//! schema named there (every member described, the required ones present, each of the type,
//! `const` or `enum` the schema says). Loosely: the YAML is walked by indentation, and
//! `$ref`s to `components/responses` and `components/schemas` are followed.

use serde_json::Value;

use crate::util::*;

const SPEC: &str = include_str!("../../../docs/openapi.yaml");

/// The lines of `block` (lines of one indentation level and deeper) under `key:`.
fn under<'a>(block: &[&'a str], key: &str) -> Option<Vec<&'a str>> {
    let indent = |l: &str| l.len() - l.trim_start().len();
    let quoted = format!("\"{key}\":");
    let plain = format!("{key}:");
    let at = block.iter().position(|l| {
        let t = l.trim_start();
        t.starts_with(&plain) || t.starts_with(&quoted)
    })?;
    let depth = indent(block[at]);
    let rest = &block[at + 1..];
    let end = rest
        .iter()
        .position(|l| !l.trim().is_empty() && indent(l) <= depth)
        .unwrap_or(rest.len());
    Some(rest[..end].to_vec())
}

fn walk<'a>(block: &[&'a str], keys: &[&str]) -> Option<Vec<&'a str>> {
    keys.iter().try_fold(block.to_vec(), |b, k| under(&b, k))
}

/// The response object documented for `path`, `method`, `status` (a `$ref` followed).
fn response(path: &str, method: &str, status: u16) -> Option<Vec<&'static str>> {
    let lines: Vec<&str> = SPEC.lines().collect();
    let r = walk(
        &lines,
        &["paths", path, method, "responses", &status.to_string()],
    )?;
    let reference = r.iter().find_map(|l| {
        l.trim()
            .strip_prefix("$ref: \"#/components/responses/")
            .map(|n| n.trim_end_matches('"'))
    });
    match reference {
        Some(name) => walk(&lines, &["components", "responses", name]),
        None => Some(r),
    }
}

/// The value of `key: VALUE` among `block`'s lines at its top level.
fn value_of<'a>(block: &[&'a str], key: &str) -> Option<&'a str> {
    let depth = block.iter().map(|l| l.len() - l.trim_start().len()).min()?;
    block.iter().find_map(|l| {
        (l.len() - l.trim_start().len() == depth)
            .then(|| l.trim().strip_prefix(&format!("{key}:")))
            .flatten()
            .map(str::trim)
    })
}

/// The items of a flow list `[a, "b"]`, unquoted.
fn flow_list(v: &str) -> Vec<String> {
    v.trim_start_matches('[')
        .trim_end_matches(']')
        .split(',')
        .map(|s| s.trim().trim_matches('"').to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Whether `v` is of the schema type `ty` (`string`, `integer`, `null`, ...).
fn is_of(v: &Value, ty: &str) -> bool {
    match ty {
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "null" => v.is_null(),
        "object" => v.is_object(),
        other => panic!("type {other} is not checked here"),
    }
}

/// `body` against the schema `name` of `components/schemas`.
fn assert_fits(body: &Value, name: &str, what: &str) {
    let lines: Vec<&str> = SPEC.lines().collect();
    let schema = walk(&lines, &["components", "schemas", name])
        .unwrap_or_else(|| panic!("{what}: no schema {name}"));
    let obj = body
        .as_object()
        .unwrap_or_else(|| panic!("{what}: {body} is not an object"));
    let props = under(&schema, "properties").expect("properties");
    for req in flow_list(value_of(&schema, "required").unwrap_or("[]")) {
        assert!(
            obj.contains_key(&req),
            "{what}: {body} lacks {req} ({name})"
        );
    }
    for (key, v) in obj {
        let p = under(&props, key)
            .unwrap_or_else(|| panic!("{what}: member {key} of {body} is not in {name}"));
        if let Some(ty) = value_of(&p, "type") {
            let types = if ty.starts_with('[') {
                flow_list(ty)
            } else {
                vec![ty.to_string()]
            };
            assert!(
                types.iter().any(|t| is_of(v, t)),
                "{what}: {key} = {v} is not {ty} ({name})"
            );
        }
        let text = v.as_str().unwrap_or_default();
        if let Some(c) = value_of(&p, "const") {
            assert_eq!(text, c, "{what}: {key} ({name})");
        }
        if let Some(e) = value_of(&p, "enum") {
            assert!(
                flow_list(e).iter().any(|x| x == text),
                "{what}: {key} = {v} not in {e} ({name})"
            );
        }
    }
}

fn assert_described(path: &str, method: &str, a: &Answer, headers: &[&str]) {
    let r = response(path, method, a.status)
        .unwrap_or_else(|| panic!("{method} {path} {} is not in docs/openapi.yaml", a.status));
    let ct = a.header("content-type").unwrap();
    let content = walk(&r, &["content", ct])
        .unwrap_or_else(|| panic!("{method} {path} {}: {ct} not described", a.status));
    let schema = walk(&content, &["schema"]).expect("a schema");
    let name = value_of(&schema, "$ref")
        .and_then(|r| r.trim_matches('"').strip_prefix("#/components/schemas/"))
        .expect("a $ref to a schema");
    assert_fits(&a.json(), name, &format!("{method} {path} {}", a.status));
    for h in headers {
        assert!(a.header(h).is_some(), "{a:?} lacks {h}");
        assert!(
            walk(&r, &["headers", h]).is_some(),
            "{method} {path} {}: header {h} not described",
            a.status
        );
    }
}

#[test]
fn every_answer_is_described_by_the_openapi_document() {
    skip_if_unavailable!();
    assert!(SPEC.starts_with("openapi: 3.1."));
    let m = msg("G-O-SENT", 1, "");
    let (flag, h) = http_listen();
    let s = Scene::new()
        .core(&["--slow-ms", "1000"])
        .relay(&[
            &flag,
            &h,
            "--read-timeout-ms",
            "200",
            "--late-reply-ms",
            "0",
        ])
        .row(RowSpec::sent(&m))
        .build();
    let post = "/v1/transfers";
    let get = "/v1/transfers/{guid}";
    let body = transfer_body(1, "");
    let first = http_post(&h, Some("\"G-O-1\""), &body);
    assert_described(post, "post", &first, &[]);
    let replay = http_post(&h, Some("\"G-O-1\""), &body);
    assert_described(post, "post", &replay, &["Idempotent-Replayed"]);
    let unknown = http_post(&h, Some("\"G-O-UNK\""), &transfer_body(1, "SLOW"));
    assert_eq!(unknown.status, 202);
    assert_described(post, "post", &unknown, &["Location"]);
    let busy = http_post(&h, Some("\"G-O-SENT\""), &body);
    assert_eq!(busy.status, 409);
    assert_described(post, "post", &busy, &["Retry-After"]);
    let reused = http_post(&h, Some("\"G-O-1\""), &transfer_body(2, ""));
    assert_described(post, "post", &reused, &[]);
    assert_described(post, "post", &http_post(&h, None, &body), &[]);
    let mut c = Http::connect(&h);
    c.send_raw(b"PUT /v1/transfers HTTP/1.1\r\nHost: r\r\nContent-Length: 0\r\n\r\n");
    assert_described(post, "post", &c.answer().unwrap(), &["Allow"]);
    c.send_raw(b"POST /v1/transfers HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\n\r\n");
    assert_described(post, "post", &c.answer().unwrap(), &[]);
    c.send_raw(b"POST /v1/transfers HTTP/1.1\r\nHost: r\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}");
    assert_described(post, "post", &c.answer().unwrap(), &[]);
    c.send_raw(b"POST /v1/transfers HTTP/1.1\r\nHost: r\r\nContent-Length: 99999\r\n\r\n");
    assert_described(post, "post", &c.answer().unwrap(), &[]);

    assert_described(get, "get", &http_get_answer(&h, "/v1/transfers/G-O-1"), &[]);
    assert_described(
        get,
        "get",
        &http_get_answer(&h, "/v1/transfers/G-O-NONE"),
        &[],
    );
    let mut c = Http::connect(&h);
    c.send_raw(b"DELETE /v1/transfers/G-O-1 HTTP/1.1\r\nHost: r\r\n\r\n");
    assert_described(get, "get", &c.answer().unwrap(), &["Allow"]);
    assert_eq!(s.core().bookings("G-O-1"), 1);
}

#[test]
fn a_not_sent_answer_is_described_too() {
    skip_if_unavailable!();
    let (flag, h) = http_listen();
    let _s = Scene::new().relay_to(&dead_url(), &[&flag, &h]).build();
    let a = http_post(&h, Some("\"G-O-DOWN\""), &transfer_body(1, ""));
    assert_eq!(a.status, 503);
    assert_described("/v1/transfers", "post", &a, &["Retry-After"]);
}

#[test]
fn the_walker_finds_what_is_there_and_only_that() {
    assert!(response("/v1/transfers", "post", 202).is_some());
    assert!(
        response("/v1/transfers", "post", 413).is_some(),
        "through $ref"
    );
    assert!(response("/v1/transfers", "post", 418).is_none());
    assert!(response("/v1/transfers/{guid}", "get", 409).is_none());
}
