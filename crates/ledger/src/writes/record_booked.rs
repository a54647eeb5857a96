//! Recovery (contract §11): a booking the core reports, written `DONE`/`0000` iff its GUID has
//! no row (one `INSERT … ON CONFLICT DO NOTHING`), never sent by us (attempts 0).

use crate::error::Result;
use crate::postgres::{PgStore, params};
use crate::recovery::Booked;
use crate::sqlite::{Hold, Ledger};

const SQLITE: &str = "\
    INSERT INTO tx (guid, tx_code, state, rsp_code, request, response, attempts, updated_at, \
                    channel) \
    VALUES (?1, ?2, 'DONE', '0000', ?3, ?4, 0, datetime('now'), ?5) \
    ON CONFLICT (guid) DO NOTHING";
const POSTGRES: &str = "\
    INSERT INTO tx (guid, tx_code, state, rsp_code, request, response, attempts, updated_at, \
                    channel) \
    VALUES ($1, $2, 'DONE', '0000', $3, $4, 0, now(), $5) \
    ON CONFLICT (guid) DO NOTHING";

pub trait RecordBooked {
    /// Writes a booking the core reports as a DONE/`0000` row iff the GUID has no row (one
    /// `INSERT … ON CONFLICT DO NOTHING`); true iff it did.
    fn record_booked(&self, b: &Booked) -> Result<bool>;
}

impl Ledger {
    /// Writes `b` as a DONE/`0000` row iff the GUID has no row; true iff it did.
    pub fn record_booked(&self, b: &Booked) -> Result<bool> {
        self.as_actor(b.who.as_deref(), Some(&b.reason), || {
            let n = self
                .conn
                .prepare_cached(SQLITE)?
                .execute(rusqlite::params![
                    b.guid, b.tx_code, b.request, b.response, b.channel
                ])?;
            Ok(n == 1)
        })
    }
}

impl<H: Hold> RecordBooked for H {
    fn record_booked(&self, b: &Booked) -> Result<bool> {
        let b = b.clone();
        self.write_with(move |l| l.record_booked(&b))
    }
}

impl RecordBooked for PgStore {
    fn record_booked(&self, b: &Booked) -> Result<bool> {
        let p = params![
            b.guid.clone(),
            b.tx_code.clone(),
            b.request.clone(),
            b.response.clone(),
            b.channel.clone()
        ];
        let n = self.execute_as(
            "writing a booking",
            b.who.clone(),
            Some(b.reason.clone()),
            POSTGRES,
            p,
        )?;
        Ok(n == 1)
    }
}
