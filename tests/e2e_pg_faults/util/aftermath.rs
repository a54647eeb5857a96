//! The check that a fault left nothing wrong behind: no GUID booked twice, every `E905`
//! GUID never sent, settled and resent once.

use std::collections::HashMap;
use std::process::Command;

use testkit::{CoreHttp, bin};

use super::{Call, PASSWORD, RowView, Rows, call};

/// The core simulator's booking counts per GUID.
pub fn bookings(core: &CoreHttp) -> HashMap<String, u64> {
    let stats = core.stats().expect("the simulator's /_stats");
    stats["by_guid"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(g, n)| (g.clone(), n.as_u64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default()
}

/// What a fault left behind, as the check found it.
#[derive(Debug, Default)]
pub struct Aftermath {
    pub booked: usize,
    pub e905: usize,
    /// `E905` GUIDs that had a row (`SENT`: a claim that committed after its deadline).
    pub e905_rows: Vec<(String, RowView)>,
    /// What a resend got before resolve settled a `SENT` row (`E903`: in flight).
    pub resent_before_settling: Vec<(String, String)>,
    /// `E905` GUIDs settled by `resolve --stale-sent` before their resend.
    pub settled: u64,
}

impl std::fmt::Display for Aftermath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let left: Vec<String> = self
            .e905_rows
            .iter()
            .map(|(g, r)| format!("{g} {}/{}", r.state, r.attempts))
            .collect();
        write!(
            f,
            "{} booked, {} E905; E905 GUIDs with a row: {left:?}, resent before settling: \
             {:?}; {} settled by resolve --stale-sent; every E905 GUID then resent and booked \
             once",
            self.booked, self.e905, self.resent_before_settling, self.settled
        )
    }
}

/// The check after a fault: every call was answered `0000` or `E905`; no GUID is booked
/// twice; a `0000` GUID is booked once with a `DONE` row; an `E905` GUID was never sent to
/// the core and has no row or a `SENT`/`FAILED` one. Then each `E905` GUID is settled
/// (`resolve --stale-sent` for a `SENT` row) and resent: `0000`, booked once.
pub fn check_aftermath(
    calls: &[Call],
    relay: &str,
    db: &str,
    rows: &Rows,
    core: &CoreHttp,
    core_url: &str,
) -> Aftermath {
    let mut a = Aftermath::default();
    let counts = bookings(core);
    for (g, n) in &counts {
        assert!(*n <= 1, "{g} booked {n} times");
    }
    let mut to_settle = Vec::new();
    for c in calls {
        let n = counts.get(&c.guid).copied().unwrap_or(0);
        let row = rows.row(&c.guid);
        match c.code.as_str() {
            "0000" => {
                a.booked += 1;
                assert_eq!(n, 1, "{} answered 0000 but booked {n} times", c.guid);
                let row = row.unwrap_or_else(|| panic!("{} answered 0000 has no row", c.guid));
                assert_eq!(
                    (row.state.as_str(), row.rsp_code.as_deref()),
                    ("DONE", Some("0000")),
                    "{}",
                    c.guid
                );
            }
            "E905" => {
                a.e905 += 1;
                assert_eq!(n, 0, "{} answered E905 but the core booked it", c.guid);
                if let Some(row) = row {
                    assert!(
                        row.state == "SENT" || row.state == "FAILED",
                        "{} answered E905 has a row {row:?}",
                        c.guid
                    );
                    a.e905_rows.push((c.guid.clone(), row));
                }
                to_settle.push(c.guid.clone());
            }
            other => panic!("{} answered {other:?} ({:?})", c.guid, c.elapsed),
        }
    }
    // A SENT row left by a claim that committed after its deadline holds its GUID "in
    // flight" until resolve --stale-sent settles it.
    for (g, row) in &a.e905_rows {
        if row.state == "SENT" {
            let c = call(relay, g);
            assert_eq!(c.code, "E903", "resend of {g} while its row is SENT");
            a.resent_before_settling.push((g.clone(), c.code));
        }
    }
    if rows.age_sent(&to_settle) > 0 {
        let out = Command::new(bin("resolve"))
            .args(["--db", db, "--core", core_url, "--min-age", "60"])
            .args(["--stale-sent", "60"])
            .output()
            .expect("run resolve");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            !format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)).contains(PASSWORD),
            "resolve shows the password"
        );
        assert!(
            out.status.success(),
            "resolve: {:?}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        a.settled = a
            .e905_rows
            .iter()
            .filter(|(_, r)| r.state == "SENT")
            .count() as u64;
        for g in &to_settle {
            let row = rows.row(g);
            assert!(
                row.as_ref().is_none_or(|r| r.state == "FAILED"),
                "{g} after resolve: {row:?}"
            );
        }
    }
    for g in &to_settle {
        let c = call(relay, g);
        assert_eq!(c.code, "0000", "resend of {g} after the fault");
    }
    let counts = bookings(core);
    for g in &to_settle {
        assert_eq!(counts.get(g).copied(), Some(1), "{g} after its resend");
    }
    for (g, n) in &counts {
        assert!(*n <= 1, "{g} booked {n} times");
    }
    a
}
