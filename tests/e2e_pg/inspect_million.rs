//! `inspect` on a ledger of a million rows on PostgreSQL: the test of
//! `tests/e2e/inspect/million.rs`, here ignored (building the rows takes longer than the
//! suite should): `cargo test --test e2e_pg inspect_million -- --ignored --nocapture`.

#[test]
#[ignore = "a million rows: a measurement, run with --ignored"]
fn summary_and_pages_of_a_million_rows_on_postgres() {
    crate::util::skip_if_unavailable!();
    crate::inspect::million::summary_and_pages_of_a_million_rows();
}
