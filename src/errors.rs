//! How errors reach the user: always through `ereport` with a SQLSTATE, a
//! message that says what is wrong and a hint that says how to fix it.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

/// Raises an ERROR; never returns.
#[track_caller]
pub fn raise(code: PgSqlErrorCode, message: impl Into<String>, hint: impl Into<String>) -> ! {
    ErrorReport::new(
        code,
        format!("snowflake_id: {}", message.into()),
        function_name(),
    )
    .set_hint(hint)
    .report(PgLogLevel::ERROR);
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
    ErrorReport::new(
        code,
        format!("snowflake_id: {}", message.into()),
        function_name(),
    )
    .set_detail(detail)
    .set_hint(hint)
    .report(PgLogLevel::ERROR);
    unreachable!("ERROR does not return")
}

/// Emits a WARNING and continues.
#[track_caller]
pub fn warn(code: PgSqlErrorCode, message: impl Into<String>, hint: impl Into<String>) {
    ErrorReport::new(
        code,
        format!("snowflake_id: {}", message.into()),
        function_name(),
    )
    .set_hint(hint)
    .report(PgLogLevel::WARNING);
}

fn function_name() -> &'static str {
    "snowflake_id"
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
