//! `snowflake_encode` and `snowflake_parse`: IDs as fixed-width text
//! (`base62`, `base32`, `hex`, `decimal`), for clients that cannot hold a
//! 64-bit integer (JavaScript's numbers lose IDs above 2^53). The codecs are
//! in [`crate::core::text_forms`]; their errors' SQLSTATEs are in
//! [`crate::pg::errors`].

use crate::core::text_forms::{self, Format};
use crate::pg::errors::raise;
use pgrx::prelude::*;

fn format_named(name: &str) -> Format {
    Format::from_name(name).unwrap_or_else(|e| raise(e))
}

/// The ID as fixed-width text in `format` (`base62`, `base32`, `hex` or
/// `decimal`): encoded IDs sort like the numbers under `COLLATE "C"`.
#[pg_extern(immutable, parallel_safe)]
fn snowflake_encode(id: i64, format: default!(&str, "'base62'")) -> String {
    text_forms::encode(id, format_named(format)).unwrap_or_else(|e| raise(e))
}

/// The ID that `snowflake_encode(id, format)` wrote as `txt`.
#[pg_extern(immutable, parallel_safe)]
fn snowflake_parse(txt: &str, format: default!(&str, "'base62'")) -> i64 {
    text_forms::parse(txt, format_named(format)).unwrap_or_else(|e| raise(e))
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use crate::test_support::{error_of, one};
    use pgrx::prelude::*;

    #[pg_test]
    fn default_format_is_base62() {
        assert_eq!(
            one::<String>("SELECT snowflake_encode(249909418513149952)"),
            "0ISaRSN189A"
        );
        assert_eq!(
            one::<i64>("SELECT snowflake_parse('0ISaRSN189A')"),
            249909418513149952
        );
    }

    #[pg_test]
    fn every_format_round_trips_issued_ids() {
        Spi::run("CREATE TEMP TABLE ids AS SELECT snowflake_next() AS id FROM generate_series(1, 2000) UNION ALL VALUES (0), (1), (9223372036854775807)").unwrap();
        for f in ["base62", "base32", "hex", "decimal"] {
            let bad: i64 = one(&format!(
                "SELECT count(*) FROM ids WHERE snowflake_parse(snowflake_encode(id, '{f}'), '{f}') <> id
                    OR length(snowflake_encode(id, '{f}')) <> (SELECT length(snowflake_encode(0, '{f}')))"
            ));
            assert_eq!(bad, 0, "{f}");
        }
        assert_eq!(
            one::<i64>("SELECT count(*) FROM ids WHERE snowflake_parse(id::text, 'decimal') <> id"),
            0
        );
        assert_eq!(
            one::<String>("SELECT snowflake_encode(255, 'hex')"),
            "00000000000000ff"
        );
        assert_eq!(
            one::<String>("SELECT snowflake_encode(9223372036854775807, 'base32')"),
            "7ZZZZZZZZZZZZ"
        );
    }

    #[pg_test]
    fn text_order_is_id_order_under_collate_c() {
        Spi::run("CREATE TEMP TABLE ids AS SELECT (random() * 9223372036854775807)::bigint AS id FROM generate_series(1, 3000) UNION ALL SELECT snowflake_next() FROM generate_series(1, 100)").unwrap();
        for f in ["base62", "base32", "hex", "decimal"] {
            let bad: i64 = one(&format!(
                "SELECT count(*) FROM (
                   SELECT id, lag(id) OVER (ORDER BY snowflake_encode(id, '{f}') COLLATE \"C\") AS prev FROM ids
                 ) s WHERE prev > id"
            ));
            assert_eq!(bad, 0, "{f}");
        }
    }

    #[pg_test]
    fn linguistic_collation_sorts_all_but_base62() {
        // ICU's English collation (PostgreSQL built with ICU, as Debian's
        // is): digits and one case of letters sort like bytes, mixed case
        // does not: 'a' (36) sorts before 'B' (11).
        if !one::<bool>("SELECT EXISTS (SELECT 1 FROM pg_collation WHERE collname = 'en-x-icu')") {
            return;
        }
        Spi::run("CREATE TEMP TABLE ids AS SELECT (random() * 9223372036854775807)::bigint AS id FROM generate_series(1, 3000) UNION ALL VALUES (11), (36)").unwrap();
        for (f, sorts) in [
            ("base62", false),
            ("base32", true),
            ("hex", true),
            ("decimal", true),
        ] {
            let bad: i64 = one(&format!(
                "SELECT count(*) FROM (
                   SELECT id, lag(id) OVER (ORDER BY snowflake_encode(id, '{f}') COLLATE \"en-x-icu\") AS prev FROM ids
                 ) s WHERE prev > id"
            ));
            assert_eq!(bad == 0, sorts, "{f}: {bad} out of order");
        }
    }

    #[pg_test]
    fn base32_and_hex_parse_any_case() {
        assert_eq!(
            one::<i64>("SELECT snowflake_parse('7zzzzzzzzzzzz', 'base32')"),
            i64::MAX
        );
        assert_eq!(
            one::<i64>("SELECT snowflake_parse('00000000000000FF', 'HEX')"),
            255
        );
    }

    #[pg_test]
    fn huge_texts_are_quoted_by_a_bounded_excerpt() {
        // A megabyte of text in, a short message out, in each format and
        // for a huge format name.
        for format in ["base62", "base32", "hex", "decimal"] {
            let (s, m, _) = error_of(&format!(
                "PERFORM snowflake_parse(repeat('!', 1000000), '{format}')"
            ));
            assert_eq!(s, "22P02");
            assert!(m.len() < 200, "{format}: a message of {} bytes", m.len());
            assert!(m.contains("!!!..."), "{m}");
        }
        let (s, m, _) = error_of("PERFORM snowflake_encode(1, repeat('x', 1000000))");
        assert_eq!((s.as_str(), m.len() < 200), ("22023", true), "{m}");
    }

    #[pg_test]
    fn errors_have_sqlstate_message_and_hint() {
        let (s, m, h) = error_of("PERFORM snowflake_encode(1, 'base64')");
        assert_eq!(s, "22023");
        assert_eq!(m, "snowflake_id: unknown ID format \"base64\"");
        assert_eq!(h, "The formats are base62, base32, hex, decimal.");

        let (s, m, _) = error_of("PERFORM snowflake_parse('0ISaRSN189A', 'nope')");
        assert_eq!((s.as_str(), m.contains("nope")), ("22023", true));

        let (s, m, h) = error_of("PERFORM snowflake_encode(-5)");
        assert_eq!(s, "22003");
        assert_eq!(
            m,
            "snowflake_id: -5 is not a snowflake ID: IDs are never negative"
        );
        assert!(!h.is_empty());

        let (s, m, h) = error_of("PERFORM snowflake_parse('AzL8n0Y58m8')");
        assert_eq!(s, "22003");
        assert!(m.contains("out of range"), "{m}");
        assert!(h.contains("AzL8n0Y58m7"), "{h}");

        let (s, _, _) = error_of("PERFORM snowflake_parse('9223372036854775808', 'decimal')");
        assert_eq!(s, "22003");

        for bad in [
            "PERFORM snowflake_parse('')",
            "PERFORM snowflake_parse('0ISaRSN189')",
            "PERFORM snowflake_parse('0ISaRSN189-')",
            "PERFORM snowflake_parse('000000000000O', 'base32')",
            "PERFORM snowflake_parse('-1', 'decimal')",
            "PERFORM snowflake_parse(' 1', 'decimal')",
        ] {
            let (s, _, h) = error_of(bad);
            assert_eq!(s, "22P02", "{bad}");
            assert!(!h.is_empty(), "{bad}");
        }
        let (_, _, h) = error_of("PERFORM snowflake_parse('000000000000O', 'base32')");
        assert!(h.contains("O is probably 0"), "{h}");
    }

    #[pg_test]
    fn null_in_null_out() {
        assert_eq!(
            Spi::get_one::<String>("SELECT snowflake_encode(NULL)").unwrap(),
            None
        );
        assert_eq!(
            Spi::get_one::<i64>("SELECT snowflake_parse(NULL, 'hex')").unwrap(),
            None
        );
    }

    #[pg_test]
    fn immutable_so_usable_in_indexes() {
        assert_eq!(
            one::<String>("SELECT string_agg(provolatile::text || proparallel::text || proisstrict::int::text, ',' ORDER BY proname) FROM pg_proc WHERE proname IN ('snowflake_encode', 'snowflake_parse')"),
            "is1,is1"
        );
        Spi::run("CREATE TEMP TABLE t (id bigint DEFAULT snowflake_next())").unwrap();
        Spi::run("CREATE INDEX ON t (snowflake_encode(id))").unwrap();
    }
}
