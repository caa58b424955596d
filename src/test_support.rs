//! Helpers for the `#[pg_test]` tests, which run inside the server that
//! `cargo pgrx test` starts (see `crate::pg_test`).

use pgrx::prelude::*;

/// The single non-NULL value `sql` returns.
pub fn one<T: IntoDatum + FromDatum>(sql: &str) -> T {
    Spi::get_one::<T>(sql)
        .expect("query runs")
        .expect("not null")
}

/// Whether `sql`, a query of one boolean, returns true.
pub fn holds(sql: &str) -> bool {
    Spi::get_one::<bool>(sql) == Ok(Some(true))
}

/// Runs `sql`, naming it if it fails.
pub fn run(sql: &str) {
    Spi::run(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// The SQLSTATE, message and hint (empty if none) that the PL/pgSQL
/// statement `stmt` (for example `PERFORM f(1)`) fails with. A statement
/// that succeeds fails the test.
pub fn error_of(stmt: &str) -> (String, String, String) {
    run(&format!(
        "DO $$ BEGIN {stmt}; RAISE 'no error'; EXCEPTION WHEN OTHERS THEN
           DECLARE s text; m text; h text;
           BEGIN GET STACKED DIAGNOSTICS s = RETURNED_SQLSTATE, m = MESSAGE_TEXT, h = PG_EXCEPTION_HINT;
             CREATE TEMP TABLE IF NOT EXISTS test_error (s text, m text, h text);
             DELETE FROM test_error; INSERT INTO test_error VALUES (s, m, coalesce(h, ''));
           END; END $$"
    ));
    let s: String = one("SELECT s FROM test_error");
    let m: String = one("SELECT m FROM test_error");
    let h: String = one("SELECT h FROM test_error");
    assert_ne!(m, "no error", "{stmt} did not fail");
    (s, m, h)
}
