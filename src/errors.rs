//! How errors reach the user: always through `ereport` with a SQLSTATE, a
//! message that says what is wrong and a hint that says how to fix it.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

/// Every message starts with the extension's name, so that it is clear in
/// the server log which component is speaking.
#[track_caller]
fn report(
    level: PgLogLevel,
    code: PgSqlErrorCode,
    message: String,
    detail: Option<String>,
    hint: String,
) {
    let mut report =
        ErrorReport::new(code, format!("snowflake_id: {message}"), "snowflake_id").set_hint(hint);
    if let Some(detail) = detail {
        report = report.set_detail(detail);
    }
    report.report(level);
}

/// Raises an ERROR; never returns.
#[track_caller]
pub fn raise(code: PgSqlErrorCode, message: impl Into<String>, hint: impl Into<String>) -> ! {
    report(PgLogLevel::ERROR, code, message.into(), None, hint.into());
    unreachable!("ERROR does not return")
}

/// Like [`raise`] with a DETAIL line.
#[track_caller]
pub fn raise_with_detail(
    code: PgSqlErrorCode,
    message: impl Into<String>,
    detail: impl Into<String>,
    hint: impl Into<String>,
) -> ! {
    report(
        PgLogLevel::ERROR,
        code,
        message.into(),
        Some(detail.into()),
        hint.into(),
    );
    unreachable!("ERROR does not return")
}

/// Emits a WARNING and continues.
#[track_caller]
pub fn warn(code: PgSqlErrorCode, message: impl Into<String>, hint: impl Into<String>) {
    report(PgLogLevel::WARNING, code, message.into(), None, hint.into());
}

/// The error every function raises when the library was not preloaded.
#[track_caller]
pub fn not_preloaded() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "the library is not loaded through shared_preload_libraries",
        "Add snowflake_id to shared_preload_libraries in postgresql.conf (for example shared_preload_libraries = 'snowflake_id'), set snowflake_id.node_id, and restart the server.",
    )
}
