//! The set-up most tests start from: a temp ledger (on the binary's backend), perhaps a
//! core simulator, perhaps a relay, and rows made by hand.
//!
//! ```ignore
//! let s = Scene::new()
//!     .core(&["--slow-ms", "1000"])
//!     .relay(&["--read-timeout-ms", "300"])
//!     .row(RowSpec::unknown(&m).age(OLD))
//!     .build();
//! assert_eq!(code(&s.call(&m)), "E901");
//! s.resolve(&["--min-age", "60"]).expect_code(EXIT_SETTLED);
//! assert_eq!(s.core().bookings("G-1"), 1);
//! ```

use testkit::TempLedger;

use super::coresim::Core;
use super::process::{Run, Server, reprocess, resolve, start_relay};
use super::rows::{RowSpec, insert_all};

/// What a test runs against. Fields drop in order: the relay stops before the core.
pub struct Scene {
    relay: Option<Server>,
    core: Option<Core>,
    pub db: TempLedger,
}

/// Where the scene's relay sends transfers.
enum RelayTo {
    SceneCore,
    Url(String),
}

#[must_use = "call .build()"]
pub struct SceneBuilder {
    core: Option<Vec<String>>,
    relay: Option<(RelayTo, Vec<String>)>,
    rows: Vec<RowSpec>,
}

impl Scene {
    #[allow(clippy::new_ret_no_self)] // a scene is built: Scene::new()…build()
    pub fn new() -> SceneBuilder {
        SceneBuilder {
            core: None,
            relay: None,
            rows: Vec::new(),
        }
    }

    /// The scene's core simulator.
    pub fn core(&self) -> &Core {
        self.core.as_ref().expect("a scene with .core(…)")
    }

    /// The scene's relay.
    pub fn relay(&self) -> &Server {
        self.relay.as_ref().expect("a scene with .relay(…)")
    }

    /// The scene's relay, to stop it or wait for its exit.
    pub fn relay_mut(&mut self) -> &mut Server {
        self.relay.as_mut().expect("a scene with .relay(…)")
    }

    /// The scene's relay's address.
    pub fn addr(&self) -> &str {
        &self.relay().addr
    }

    /// One round trip to the scene's relay on a fresh connection.
    pub fn call(&self, m: &[u8]) -> Vec<u8> {
        super::messages::call(self.addr(), m)
    }

    /// Inserts a row by hand.
    pub fn put(&self, row: RowSpec) {
        row.insert(&self.db);
    }

    /// Another relay on the scene's ledger, in front of the scene's core.
    pub fn start_relay(&self, extra: &[&str]) -> Server {
        start_relay(&self.db, &self.core().url(), extra)
    }

    /// `resolve` on the scene's ledger, asking the scene's core.
    pub fn resolve(&self, extra: &[&str]) -> Run {
        resolve(&self.db, &self.core().url(), extra)
    }

    /// `reprocess` on the scene's ledger, sending to the scene's core.
    pub fn reprocess(&self, extra: &[&str]) -> Run {
        reprocess(&self.db, &self.core().url(), extra)
    }
}

impl SceneBuilder {
    /// A core simulator on a free port.
    pub fn core(mut self, extra: &[&str]) -> SceneBuilder {
        self.core = Some(strings(extra));
        self
    }

    /// A relay in front of the scene's core.
    pub fn relay(mut self, extra: &[&str]) -> SceneBuilder {
        self.relay = Some((RelayTo::SceneCore, strings(extra)));
        self
    }

    /// A relay in front of `core_url` (a core that is down, say).
    pub fn relay_to(mut self, core_url: &str, extra: &[&str]) -> SceneBuilder {
        self.relay = Some((RelayTo::Url(core_url.to_string()), strings(extra)));
        self
    }

    /// A row made by hand.
    pub fn row(mut self, row: RowSpec) -> SceneBuilder {
        self.rows.push(row);
        self
    }

    /// Rows made by hand.
    pub fn rows(mut self, rows: impl IntoIterator<Item = RowSpec>) -> SceneBuilder {
        self.rows.extend(rows);
        self
    }

    pub fn build(self) -> Scene {
        let db = super::temp_ledger();
        if !self.rows.is_empty() {
            insert_all(&db, &self.rows);
        }
        let core = self.core.map(|args| Core::start(&strs(&args)));
        let relay = self.relay.map(|(to, args)| {
            let url = match to {
                RelayTo::SceneCore => core
                    .as_ref()
                    .expect(".relay(…) needs .core(…); use .relay_to(url, …)")
                    .url(),
                RelayTo::Url(url) => url,
            };
            start_relay(&db, &url, &strs(&args))
        });
        Scene { relay, core, db }
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}
