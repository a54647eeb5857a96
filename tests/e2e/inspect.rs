//! `inspect`: the operator's tool. Here its listing without a command, read-only; its
//! commands in `inspect/`: `summary`, `list` and `show` on a ledger the relay wrote
//! (`views`), paged (`paging`), on a million rows (`million`), `settle`, the one that writes a
//! row (`settle`), and `recovery`, the ledger's recovery mark shown, begun and ended
//! (`recovery`).

// Paths relative to this file's folder: the same whether this file is a module of `e2e` or
// of `e2e_pg` (which includes it by `#[path]`).
#[path = "inspect/million.rs"]
pub mod million;
#[path = "inspect/paging.rs"]
mod paging;
#[path = "inspect/recovery.rs"]
mod recovery;
#[path = "inspect/settle.rs"]
mod settle;
#[path = "inspect/views.rs"]
mod views;

use std::path::{Path, PathBuf};

use crate::util::*;

/// `inspect --db DB ARGS…`
pub fn inspect(db: &TempLedger, args: &[&str]) -> Run {
    tool("inspect", &[&["--db", db.arg()], args].concat())
}

/// The sibling files SQLite may create next to `path`.
fn sqlite_siblings(path: &Path) -> Vec<PathBuf> {
    ["-wal", "-shm", "-journal"]
        .iter()
        .map(|s| PathBuf::from(format!("{}{s}", path.display())))
        .filter(|p| p.exists())
        .collect()
}

#[test]
fn inspect_lists_rows_and_counts_and_changes_nothing() {
    skip_if_unavailable!();
    let s = Scene::new()
        .rows([
            RowSpec::new("G-IN-DONE", State::Done).code("0000").age(DAY),
            RowSpec::unknown(&msg("G-IN-UNK", 5, "")).age(OLD),
            RowSpec::bare("G-IN-BARE", State::Failed),
        ])
        .build();
    let before = rows_by_guid(&s.db);
    let at = |g: &str| s.db.row(g).unwrap().updated_at;

    let r = tool("inspect", &["--db", s.db.arg()]);
    r.expect_code(EXIT_SETTLED);
    assert_eq!(
        r.stdout(),
        format!(
            "guid\tstate\trsp_code\tattempts\tupdated_at\n\
             G-IN-DONE\tDONE\t0000\t1\t{}\n\
             G-IN-UNK\tUNKNOWN\tE901\t1\t{}\n\
             G-IN-BARE\tFAILED\t-\t0\t{}\n\
             rows by state: 1 DONE, 1 FAILED, 1 UNKNOWN\n",
            at("G-IN-DONE"),
            at("G-IN-UNK"),
            at("G-IN-BARE")
        )
    );
    let r = tool(
        "inspect",
        &["--db", s.db.arg(), "--guid", "G-IN-UNK", "--json"],
    );
    r.expect_code(EXIT_SETTLED);
    let j = r.json();
    assert_eq!(j["rows"].as_array().map(Vec::len), Some(1), "{j}");
    assert_eq!(j["rows"][0]["guid"], "G-IN-UNK", "{j}");
    assert_eq!(
        j["by_state"],
        serde_json::json!({"DONE": 1, "FAILED": 1, "UNKNOWN": 1})
    );
    assert_eq!(rows_by_guid(&s.db), before, "nothing changed");
}

#[test]
fn inspect_on_a_ledger_no_tool_created_is_exit_1_and_creates_nothing() {
    skip_if_unavailable!();
    let db = temp_ledger();
    for extra in [&[][..], &["--json"][..]] {
        let r = tool("inspect", &[&["--db", db.arg()][..], extra].concat());
        r.expect_code(EXIT_FATAL);
        assert_eq!(r.stderr().lines().count(), 1, "{}", r.stderr());
        assert_stdout_for_failure(&r, extra.contains(&"--json"), EXIT_FATAL);
    }
    assert!(!db.created(), "inspect created the ledger");
}

sqlite_only! {
    "a file's bytes, its WAL siblings and its pragmas are SQLite's",
    fn inspect_opens_a_hand_made_sqlite_file_without_changing_a_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hand.db");
        let schema = include_str!("../../schema.sql");
        let (table, index) = schema
            .split_once("-- resolve, reprocess and purge")
            .expect("schema.sql: the table, then its index");
        assert!(index.contains("CREATE INDEX IF NOT EXISTS tx_state_updated"));
        {
            let c = rusqlite::Connection::open(&path).unwrap();
            c.execute_batch(table).unwrap();
            c.execute_batch(
                "INSERT INTO tx (guid, tx_code, state, rsp_code, attempts, updated_at) \
                 VALUES ('G-RO-1', 'TRNF', 'DONE', '0000', 1, '2026-01-02 03:04:05');",
            )
            .unwrap();
            let mode: String = c
                .query_row("PRAGMA journal_mode", [], |r| r.get(0))
                .unwrap();
            assert_eq!(mode, "delete");
        }
        let before = std::fs::read(&path).unwrap();
        assert!(sqlite_siblings(&path).is_empty());

        let db = path.to_str().unwrap();
        for extra in [
            &[][..],
            &["--json"][..],
            &["--guid", "G-RO-1"][..],
            &["list", "--state", "DONE", "--json"][..],
            &["show", "G-RO-1"][..],
            &["show", "G-RO-1", "--json"][..],
        ] {
            let r = tool("inspect", &[&["--db", db], extra].concat());
            r.expect_code(EXIT_SETTLED);
            assert!(r.stdout().contains("G-RO-1"), "{extra:?}: {}", r.stdout());
        }
        let r = tool("inspect", &["--db", db, "summary"]);
        r.expect_code(EXIT_SETTLED);
        assert!(
            r.stdout().starts_with("rows by state: 1 DONE\n"),
            "{}",
            r.stdout()
        );
        // A ledger from before the history: show says it has none to read.
        let r = tool("inspect", &["--db", db, "show", "G-RO-1"]);
        assert!(
            r.stdout().contains("\nhistory:    cannot be read: "),
            "{}",
            r.stdout()
        );
        let r = tool("inspect", &["--db", db]);
        assert!(
            r.stdout()
                .contains("G-RO-1\tDONE\t0000\t1\t2026-01-02 03:04:05\n"),
            "{}",
            r.stdout()
        );

        assert!(
            std::fs::read(&path).unwrap() == before,
            "the file's bytes are unchanged"
        );
        assert_eq!(sqlite_siblings(&path), Vec::<PathBuf>::new());
        let c =
            rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .unwrap();
        let version: i64 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, 0);
        let indexes: i64 = c
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'tx_state_updated'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(indexes, 0, "no index created");
    }
}
