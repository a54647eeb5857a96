//! The PostgreSQL ledger's schema versions (`postgres::schema`): the steps from an empty
//! database make schema.postgres.sql; a ledger of every older version, and one made by hand
//! from any version's schema, is brought to that same schema by the next tool that opens it,
//! its rows kept. (SQLite's are `sqlite::migrations`' unit tests.)

use ledger::postgres::{SCHEMA_VERSION, create_at_version};
use ledger::{Access, Db, Store};

/// Every object of the ledger's schema (each test ledger is a schema of its own, see
/// testkit::pg), as the catalogue describes it: columns, constraints, indexes, sequences,
/// triggers and functions, its schema's name taken out.
pub(crate) fn described(c: &mut postgres::Client) -> Vec<String> {
    let schema: String = c.query_one("SELECT current_schema()", &[]).unwrap().get(0);
    const QUERIES: [&str; 6] = [
        "SELECT format('column %s.%s %s null=%s default=%s', table_name, column_name, data_type, \
         is_nullable, column_default) FROM information_schema.columns \
         WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position",
        "SELECT format('constraint %s.%s %s', conrelid::regclass, conname, \
         pg_get_constraintdef(oid)) FROM pg_constraint \
         WHERE connamespace = current_schema()::regnamespace ORDER BY 1",
        "SELECT format('index %s', indexdef) FROM pg_indexes \
         WHERE schemaname = current_schema() ORDER BY 1",
        "SELECT format('sequence %s', relname) FROM pg_class \
         WHERE relkind = 'S' AND relnamespace = current_schema()::regnamespace ORDER BY 1",
        "SELECT format('trigger %s', pg_get_triggerdef(oid)) FROM pg_trigger \
         WHERE NOT tgisinternal AND tgrelid IN \
         (SELECT oid FROM pg_class WHERE relnamespace = current_schema()::regnamespace) \
         ORDER BY 1",
        "SELECT format('function %s %s definer=%s config=%s acl=%s', proname, md5(prosrc), \
         prosecdef, proconfig, proacl) FROM pg_proc \
         WHERE pronamespace = current_schema()::regnamespace ORDER BY 1",
    ];
    QUERIES
        .iter()
        .flat_map(|q| c.query(*q, &[]).unwrap())
        .map(|r| {
            let line = r.get::<_, String>(0);
            line.replace(&format!("{schema}."), "")
                .replace(&schema, "SCHEMA")
        })
        .filter(|line| !line.contains("ledger_schema"))
        .collect()
}

fn version(c: &mut postgres::Client) -> i32 {
    c.query_one("SELECT max(version) FROM ledger_schema", &[])
        .unwrap()
        .get(0)
}

pub(crate) fn connect(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap()
}

/// A tool's open: applies what the ledger lacks.
fn open_as_a_tool(url: &str) -> std::sync::Arc<dyn Store> {
    let db: Db = url.parse().expect("a PostgreSQL URL");
    db.open(Access::Tool, "suite").expect("a tool opens it")
}

/// schema.postgres.sql as a new ledger gets it.
fn current(server: &testkit::pg::Server) -> Vec<String> {
    let url = server.fresh_db();
    drop(open_as_a_tool(&url));
    described(&mut connect(&url))
}

#[test]
fn the_steps_from_an_empty_database_make_schema_postgres_sql() {
    let Some(server) = testkit::pg::shared() else {
        return testkit::pg::did_not_run();
    };
    let mut c = connect(&server.fresh_db());
    create_at_version(&mut c, SCHEMA_VERSION).unwrap();
    assert_eq!(version(&mut c), SCHEMA_VERSION);
    assert_eq!(described(&mut c), current(server));
}

/// A ledger of each older version, with a row in it, is brought up to date by the next tool
/// that opens it: the same schema as a new ledger's, its row kept, a change recorded in the
/// history with the channel.
#[test]
fn a_ledger_of_every_older_version_is_upgraded_to_the_same_schema() {
    let Some(server) = testkit::pg::shared() else {
        return testkit::pg::did_not_run();
    };
    let want = current(server);
    for from in 0..SCHEMA_VERSION {
        let url = server.fresh_db();
        let mut c = connect(&url);
        create_at_version(&mut c, from).unwrap();
        if from >= 1 {
            c.batch_execute(
                "INSERT INTO tx (guid, tx_code, state, request, attempts)
                 VALUES ('OLD', 'TRNF', 'FAILED', '\\x71', 1)",
            )
            .unwrap();
        }
        let store = open_as_a_tool(&url);
        assert_eq!(version(&mut c), SCHEMA_VERSION, "from version {from}");
        assert_eq!(described(&mut c), want, "from version {from}");
        if from >= 1 {
            assert_eq!(
                store.reclaim_failed("OLD", b"q", Some("atm-1")).unwrap(),
                Some(2),
                "from version {from}"
            );
            let history = store.history("OLD").unwrap();
            assert_eq!(history.len(), 2, "from version {from}: {history:?}");
            let last = history.last().unwrap();
            assert_eq!(last.channel.as_deref(), Some("atm-1"), "from {from}");
        }
    }
}

/// A ledger made by hand from the schema of any version (no `ledger_schema`) gets every step
/// over the tables it has, and ends the same.
#[test]
fn a_ledger_made_by_hand_from_any_version_ends_the_same() {
    let Some(server) = testkit::pg::shared() else {
        return testkit::pg::did_not_run();
    };
    let want = current(server);
    for made in 1..=SCHEMA_VERSION {
        let url = server.fresh_db();
        let mut c = connect(&url);
        create_at_version(&mut c, made).unwrap();
        c.batch_execute("DROP TABLE ledger_schema").unwrap();
        drop(open_as_a_tool(&url));
        assert_eq!(described(&mut c), want, "made from version {made}");
    }
}
