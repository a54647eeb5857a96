//! `backup` on a PostgreSQL ledger: refused with one line pointing to the database's own
//! tools, nothing written, nothing connected to.

use crate::util::*;

#[test]
fn backup_refuses_a_postgres_ledger_pointing_to_its_own_tools() {
    skip_if_unavailable!();
    let s = Scene::new()
        .rows([RowSpec::unknown(&msg("G-PG-BK", 5, ""))])
        .build();
    let to = s.db.dir().join("b.db");
    let r = tool(
        "backup",
        &["--db", s.db.arg(), "--to", to.to_str().unwrap()],
    );
    assert_backup_refused_postgres(&r);
    assert!(!to.exists(), "no file written");
    assert_eq!(s.db.count(), 1, "the ledger as it was");
}
