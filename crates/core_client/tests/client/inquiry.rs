//! Inquiries (`GET /v1/transfers/{guid}`): what counts as a booking, and as "never booked".

use core_client::{Inquiry, Ours, outcome_of};

use crate::util::*;

#[test]
fn inquiry_answers() {
    let c = |raw| client(&answer(raw)).inquire(&transfer());
    assert!(matches!(
        c(json_response("200 OK", BOOKING)),
        Inquiry::Booked(_)
    ));
    assert_eq!(
        c(json_response("404 Not Found", r#"{"code":"N404"}"#)),
        Inquiry::NotFound
    );
    assert!(matches!(
        c(json_response("500 Oops", "{}")),
        Inquiry::Error(_)
    ));
    assert!(matches!(
        c(json_response("200 OK", "{}")),
        Inquiry::Error(_)
    ));
    let url = refusing();
    assert!(matches!(
        client(&url).inquire(&transfer()),
        Inquiry::Error(_)
    ));
}

#[test]
fn a_booking_must_name_our_guid_and_our_amount() {
    let c = |body| client(&answer(json_response("200 OK", body))).inquire(&transfer());
    let cases = [
        (
            r#"{"core_ref":"C1","amount":1500,"booked_at":"2026-12-02T09:30:12Z"}"#,
            "inquiry answered 200 but the booking names no guid (core_ref \"C1\", amount \
             1500, booked_at \"2026-12-02T09:30:12Z\"), ours is \"G1\"",
        ),
        (
            r#"{"guid":"G1","core_ref":"C1","amount":1,"booked_at":"2026-12-02T09:30:12Z"}"#,
            "inquiry answered 200 but the booking is for amount 1 (core_ref \"C1\", amount 1, \
             booked_at \"2026-12-02T09:30:12Z\"), ours is 1500",
        ),
        (
            r#"{"guid":"G2","core_ref":"C1","amount":1500,"booked_at":"2026-12-02T09:30:12Z"}"#,
            "inquiry answered 200 but the booking is for guid \"G2\" (core_ref \"C1\", \
             amount 1500, booked_at \"2026-12-02T09:30:12Z\"), ours is \"G1\"",
        ),
    ];
    for (body, why) in cases {
        assert_eq!(c(body), Inquiry::Error(why.into()), "{body}");
        let late = outcome_of(200, body.as_bytes(), Ours::of(&transfer()));
        assert!(is_unknown(&late), "a late reply too: {late:?}");
    }
}

#[test]
fn a_404_that_is_not_the_cores_json_proves_nothing() {
    let c = |raw| client(&answer(raw)).inquire(&transfer());
    for raw in [
        "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: 22\r\nConnection: close\r\n\r\n<h1>404 Not Found</h1>",
        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        json_response("404 Not Found", "[]"),
        json_response("404 Not Found", "\"gone\""),
    ] {
        assert!(matches!(c(raw), Inquiry::Error(_)), "{raw}");
    }
}
