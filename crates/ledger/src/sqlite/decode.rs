//! Reading SQLite's values: states as text, and rows read leniently, so that a ledger made
//! or edited by hand (text where a blob belongs, a missing count) still shows what it holds.

use rusqlite::ToSql;
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSqlOutput, ValueRef};

use crate::state::{Row, State};
use crate::store::InquiryRecord;

impl ToSql for State {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

impl FromSql for State {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        let s = value.as_str()?;
        s.parse().map_err(|e: String| FromSqlError::Other(e.into()))
    }
}

pub(super) fn lenient_text(v: ValueRef<'_>) -> Option<String> {
    match v {
        ValueRef::Null => None,
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(r) => Some(r.to_string()),
        ValueRef::Text(b) | ValueRef::Blob(b) => Some(String::from_utf8_lossy(b).into_owned()),
    }
}

fn lenient_bytes(v: ValueRef<'_>) -> Option<Vec<u8>> {
    match v {
        ValueRef::Text(b) | ValueRef::Blob(b) => Some(b.to_vec()),
        _ => None,
    }
}

impl Row {
    pub(super) fn from_sql(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
        Ok(Row {
            guid: lenient_text(r.get_ref(0)?).unwrap_or_default(),
            tx_code: lenient_text(r.get_ref(1)?),
            state: r.get(2)?,
            rsp_code: lenient_text(r.get_ref(3)?),
            request: lenient_bytes(r.get_ref(4)?),
            response: lenient_bytes(r.get_ref(5)?),
            attempts: match r.get_ref(6)? {
                ValueRef::Integer(i) => Some(i),
                _ => None,
            },
            updated_at: lenient_text(r.get_ref(7)?).unwrap_or_default(),
            channel: lenient_text(r.get_ref(8)?),
        })
    }
}

impl InquiryRecord {
    pub(crate) fn from_sql(r: &rusqlite::Row<'_>) -> rusqlite::Result<InquiryRecord> {
        Ok(InquiryRecord {
            guid: lenient_text(r.get_ref(0)?).unwrap_or_default(),
            failures: match r.get_ref(1)? {
                ValueRef::Integer(i) => i,
                _ => 0,
            },
            last_error: lenient_text(r.get_ref(2)?),
            next_at: lenient_text(r.get_ref(3)?).unwrap_or_default(),
        })
    }
}
