//! Text forms of an ID: `base62`, `base32` (Crockford), `hex` and `decimal`.
//!
//! Every form has a fixed width (leading zeros are written), and its digits
//! are in ASCII order, so comparing two encoded IDs byte by byte (PostgreSQL's
//! `COLLATE "C"`) gives the same order as comparing the numbers.
//!
//! | form | width | alphabet | parse |
//! |---|---|---|---|
//! | `base62` | 11 | `0-9A-Za-z` | exactly 11 characters, case-sensitive |
//! | `base32` | 13 | `0-9A-Z` without `I L O U` (Crockford) | exactly 13 characters, case-insensitive |
//! | `hex` | 16 | `0-9a-f` | exactly 16 characters, case-insensitive |
//! | `decimal` | 19 | `0-9` | 1 to 19 digits (so `id::text` parses too) |
//!
//! Parsing is strict: no sign, no spaces, no separators, and for the encoded
//! forms the exact width, so that a truncated or mistyped ID is an error and
//! never another ID. Crockford's base32 also allows reading `O` as `0` and
//! `I`/`L` as `1`; this parser refuses them instead, so that every ID has a
//! single text (up to case) and a mistyped one is noticed.

use std::fmt;

/// The text forms an ID can be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Base62,
    Base32,
    Hex,
    Decimal,
}

/// Every format, in the order the documentation lists them.
pub const FORMATS: [Format; 4] = [Format::Base62, Format::Base32, Format::Hex, Format::Decimal];

const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const BASE32: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const HEX: &[u8; 16] = b"0123456789abcdef";
const DECIMAL: &[u8; 10] = b"0123456789";

impl Format {
    /// The format named `name` (`base62`, `base32`, `hex`, `decimal`; case
    /// does not matter).
    pub fn from_name(name: &str) -> Result<Format, TextFormError> {
        FORMATS
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| TextFormError::UnknownFormat(excerpt(name)))
    }

    pub fn name(self) -> &'static str {
        match self {
            Format::Base62 => "base62",
            Format::Base32 => "base32",
            Format::Hex => "hex",
            Format::Decimal => "decimal",
        }
    }

    /// The digits, in increasing value (and in ASCII order).
    pub fn alphabet(self) -> &'static [u8] {
        match self {
            Format::Base62 => BASE62,
            Format::Base32 => BASE32,
            Format::Hex => HEX,
            Format::Decimal => DECIMAL,
        }
    }

    fn radix(self) -> u64 {
        self.alphabet().len() as u64
    }

    /// The number of characters of every encoded ID: enough for `i64::MAX`.
    pub fn width(self) -> usize {
        match self {
            Format::Base62 => 11,
            Format::Base32 => 13,
            Format::Hex => 16,
            Format::Decimal => 19,
        }
    }

    /// Whether lower and upper case letters are the same digit on parsing.
    pub fn case_insensitive(self) -> bool {
        matches!(self, Format::Base32 | Format::Hex)
    }

    /// The value of one character, or `None` if it is not a digit of this
    /// format.
    pub fn digit_value(self, c: u8) -> Option<u64> {
        let c = if self.case_insensitive() {
            match self {
                Format::Hex => c.to_ascii_lowercase(),
                _ => c.to_ascii_uppercase(),
            }
        } else {
            c
        };
        self.alphabet()
            .iter()
            .position(|&d| d == c)
            .map(|p| p as u64)
    }

    /// What a user should know about the format when their text was refused.
    pub fn describe(self) -> String {
        match self {
            Format::Base62 => "base62 IDs are exactly 11 characters of 0-9, A-Z and a-z (case matters)".to_string(),
            Format::Base32 => "base32 IDs are exactly 13 characters of Crockford's alphabet 0-9 and A-Z without I, L, O and U (case does not matter)".to_string(),
            Format::Hex => "hex IDs are exactly 16 characters of 0-9 and a-f (case does not matter)".to_string(),
            Format::Decimal => "decimal IDs are 1 to 19 digits 0-9, without sign or spaces".to_string(),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The most characters of a user's text an error message quotes.
pub const EXCERPT_CHARS: usize = 40;

/// A user's text as an error message quotes it: whole when short, else its
/// first [`EXCERPT_CHARS`] characters and "...". Bounded, so that an error
/// about a huge argument never copies it (a 1 GB text would be copied into
/// the message several times, through an allocator that aborts the backend
/// when memory runs out).
pub fn excerpt(text: &str) -> String {
    match text.char_indices().nth(EXCERPT_CHARS) {
        None => text.to_string(),
        Some((end, _)) => format!("{}...", &text[..end]),
    }
}

/// Why an ID cannot be written, or a text cannot be read as an ID.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TextFormError {
    #[error("unknown ID format \"{0}\"")]
    UnknownFormat(String),
    #[error("{0} is not a snowflake ID: IDs are never negative")]
    NegativeId(i64),
    #[error("empty text is not a {0} ID")]
    Empty(Format),
    #[error("\"{text}\" is not a {format} ID: it has {len} characters, a {format} ID has {width}")]
    WrongLength {
        text: String,
        format: Format,
        len: usize,
        width: usize,
    },
    #[error("\"{text}\" is not a {format} ID: character {position} ({character:?}) is not a {format} digit")]
    BadDigit {
        text: String,
        format: Format,
        /// 1-based position of the first bad character, counted in characters.
        position: usize,
        character: char,
    },
    #[error("\"{text}\" is out of range for a {format} ID: IDs are at most 9223372036854775807 (2^63 - 1)")]
    Overflow { text: String, format: Format },
}

/// What kind of error, for the SQLSTATE the SQL layer reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// A format name that does not exist (`22023` invalid_parameter_value).
    BadFormat,
    /// A value out of range: a negative ID, text above `i64::MAX` (`22003`).
    OutOfRange,
    /// Text that is not an ID in the format (`22P02` invalid_text_representation).
    BadText,
}

impl TextFormError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            TextFormError::UnknownFormat(_) => ErrorKind::BadFormat,
            TextFormError::NegativeId(_) | TextFormError::Overflow { .. } => ErrorKind::OutOfRange,
            TextFormError::Empty(_)
            | TextFormError::WrongLength { .. }
            | TextFormError::BadDigit { .. } => ErrorKind::BadText,
        }
    }

    /// How to fix it, for the error's HINT.
    pub fn hint(&self) -> String {
        match self {
            TextFormError::UnknownFormat(_) => {
                format!("The formats are {}.", FORMATS.map(Format::name).join(", "))
            }
            TextFormError::NegativeId(_) => "Pass an ID produced by snowflake_next().".to_string(),
            TextFormError::Empty(f) | TextFormError::WrongLength { format: f, .. } => {
                format!("{}; was the text cut or padded?", f.describe())
            }
            TextFormError::BadDigit {
                format: Format::Base32,
                character: 'I' | 'i' | 'L' | 'l' | 'O' | 'o' | 'U' | 'u',
                ..
            } => format!(
                "{}; a typed O is probably 0, and I or L probably 1.",
                Format::Base32.describe()
            ),
            TextFormError::BadDigit { format, .. } => {
                format!("{}; is it another format?", format.describe())
            }
            TextFormError::Overflow { format, .. } => format!(
                "The largest {format} ID is \"{}\".",
                encode(i64::MAX, *format).unwrap_or_default()
            ),
        }
    }
}

/// Writes `id` in `format`, with leading zeros to the format's width.
pub fn encode(id: i64, format: Format) -> Result<String, TextFormError> {
    if id < 0 {
        return Err(TextFormError::NegativeId(id));
    }
    let alphabet = format.alphabet();
    let radix = format.radix();
    let mut digits = vec![b'0'; format.width()];
    let mut rest = id as u64;
    for slot in digits.iter_mut().rev() {
        *slot = alphabet[(rest % radix) as usize];
        rest /= radix;
    }
    debug_assert_eq!(rest, 0, "the width holds i64::MAX");
    // Every byte comes from an ASCII alphabet.
    Ok(digits.into_iter().map(char::from).collect())
}

/// Reads an ID written in `format`. See the module documentation for what is
/// accepted.
pub fn parse(text: &str, format: Format) -> Result<i64, TextFormError> {
    if text.is_empty() {
        return Err(TextFormError::Empty(format));
    }
    let len = text.chars().count();
    let width_ok = match format {
        Format::Decimal => len <= format.width(),
        _ => len == format.width(),
    };
    // Bad characters are reported first: "abc" in hex is better described
    // by its bad digit than by its length.
    let radix = format.radix();
    let mut value: u64 = 0;
    let mut overflow = false;
    for (i, c) in text.chars().enumerate() {
        let digit = u8::try_from(c)
            .ok()
            .and_then(|b| format.digit_value(b))
            .ok_or_else(|| TextFormError::BadDigit {
                text: excerpt(text),
                format,
                position: i + 1,
                character: c,
            })?;
        match value.checked_mul(radix).and_then(|v| v.checked_add(digit)) {
            Some(v) => value = v,
            None => overflow = true,
        }
    }
    if !width_ok {
        return Err(TextFormError::WrongLength {
            text: excerpt(text),
            format,
            len,
            width: format.width(),
        });
    }
    if overflow || value > i64::MAX as u64 {
        return Err(TextFormError::Overflow {
            text: excerpt(text),
            format,
        });
    }
    Ok(value as i64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn errors_quote_a_bounded_excerpt_of_huge_texts() {
        let huge = "!".repeat(1_000_000);
        for format in [Format::Base62, Format::Base32, Format::Hex, Format::Decimal] {
            let message = parse(&huge, format).unwrap_err().to_string();
            assert!(message.len() < 200, "{format}: {} bytes", message.len());
            assert!(message.contains(&format!("\"{}...\"", "!".repeat(EXCERPT_CHARS))));
        }
        let long_digits = "9".repeat(100_000);
        let message = parse(&long_digits, Format::Decimal)
            .unwrap_err()
            .to_string();
        assert!(message.len() < 200, "{message}");
        let message = Format::from_name(&"x".repeat(100_000))
            .unwrap_err()
            .to_string();
        assert!(message.len() < 200, "{message}");
        // Short texts are quoted whole; multi-byte characters are never cut.
        assert_eq!(excerpt("abc"), "abc");
        let accents = "é".repeat(EXCERPT_CHARS + 1);
        assert_eq!(
            excerpt(&accents),
            format!("{}...", "é".repeat(EXCERPT_CHARS))
        );
        assert_eq!(
            excerpt(&"é".repeat(EXCERPT_CHARS)),
            "é".repeat(EXCERPT_CHARS)
        );
    }

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_values() {
        assert_eq!(encode(0, Format::Base62).unwrap(), "00000000000");
        assert_eq!(encode(i64::MAX, Format::Base62).unwrap(), "AzL8n0Y58m7");
        assert_eq!(encode(0, Format::Base32).unwrap(), "0000000000000");
        assert_eq!(encode(i64::MAX, Format::Base32).unwrap(), "7ZZZZZZZZZZZZ");
        assert_eq!(encode(31, Format::Base32).unwrap(), "000000000000Z");
        assert_eq!(encode(255, Format::Hex).unwrap(), "00000000000000ff");
        assert_eq!(encode(i64::MAX, Format::Hex).unwrap(), "7fffffffffffffff");
        assert_eq!(encode(42, Format::Decimal).unwrap(), "0000000000000000042");
        assert_eq!(
            encode(i64::MAX, Format::Decimal).unwrap(),
            "9223372036854775807"
        );
        assert_eq!(
            encode(249909418513149952, Format::Base62).unwrap(),
            "0ISaRSN189A"
        );
        assert_eq!(parse("0ISaRSN189A", Format::Base62), Ok(249909418513149952));
    }

    #[test]
    fn widths_hold_the_largest_id_and_no_less() {
        for f in FORMATS {
            let max = encode(i64::MAX, f).unwrap();
            assert_eq!(max.len(), f.width());
            assert_ne!(&max[..1], "0", "{f}: the width is not larger than needed");
        }
    }

    #[test]
    fn format_names() {
        assert_eq!(Format::from_name("base62"), Ok(Format::Base62));
        assert_eq!(Format::from_name("BASE32"), Ok(Format::Base32));
        assert_eq!(Format::from_name("Hex"), Ok(Format::Hex));
        assert_eq!(Format::from_name("decimal"), Ok(Format::Decimal));
        let e = Format::from_name("base64").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadFormat);
        assert_eq!(e.to_string(), "unknown ID format \"base64\"");
        assert_eq!(e.hint(), "The formats are base62, base32, hex, decimal.");
        assert!(Format::from_name("").is_err());
        assert!(Format::from_name(" base62").is_err());
    }

    #[test]
    fn negative_ids_are_refused() {
        for f in FORMATS {
            let e = encode(-1, f).unwrap_err();
            assert_eq!(e, TextFormError::NegativeId(-1));
            assert_eq!(e.kind(), ErrorKind::OutOfRange);
        }
        assert!(encode(i64::MIN, Format::Hex).is_err());
    }

    #[test]
    fn empty_text_is_refused() {
        for f in FORMATS {
            let e = parse("", f).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BadText);
            assert_eq!(e.to_string(), format!("empty text is not a {f} ID"));
        }
    }

    #[test]
    fn overflow_past_i64_max_is_refused() {
        for (text, f) in [
            ("AzL8n0Y58m8", Format::Base62),
            ("zzzzzzzzzzz", Format::Base62),
            ("8000000000000", Format::Base32),
            ("ZZZZZZZZZZZZZ", Format::Base32),
            ("8000000000000000", Format::Hex),
            ("ffffffffffffffff", Format::Hex),
            ("9223372036854775808", Format::Decimal),
            ("9999999999999999999", Format::Decimal),
        ] {
            let e = parse(text, f).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::OutOfRange, "{text}");
            assert!(e.hint().contains(&encode(i64::MAX, f).unwrap()));
        }
        // Longer than the width is a length error, also when the value would
        // fit (leading zeros).
        assert!(matches!(
            parse("00000000000000000000", Format::Decimal),
            Err(TextFormError::WrongLength { len: 20, .. })
        ));
        assert!(matches!(
            parse("99999999999999999999999", Format::Decimal),
            Err(TextFormError::WrongLength { .. })
        ));
    }

    #[test]
    fn wrong_alphabet_is_refused_with_the_position() {
        let e = parse("0IbQ3Nem0H-", Format::Base62).unwrap_err();
        assert_eq!(
            e,
            TextFormError::BadDigit {
                text: "0IbQ3Nem0H-".into(),
                format: Format::Base62,
                position: 11,
                character: '-'
            }
        );
        assert_eq!(e.kind(), ErrorKind::BadText);
        for text in [
            "000000000000I",
            "000000000000L",
            "000000000000o",
            "000000000000U",
        ] {
            let e = parse(text, Format::Base32).unwrap_err();
            assert!(
                matches!(e, TextFormError::BadDigit { position: 13, .. }),
                "{text}"
            );
            assert!(e.hint().contains("O is probably 0"), "{}", e.hint());
        }
        assert!(parse("000000000000000g", Format::Hex).is_err());
        assert!(parse("-1", Format::Decimal).is_err());
        assert!(parse("+1", Format::Decimal).is_err());
        assert!(parse(" 1", Format::Decimal).is_err());
        assert!(parse("1 ", Format::Decimal).is_err());
        // Non-ASCII is reported by character, not byte.
        let e = parse("é0000000000", Format::Base62).unwrap_err();
        assert!(matches!(
            e,
            TextFormError::BadDigit {
                position: 1,
                character: 'é',
                ..
            }
        ));
    }

    #[test]
    fn encoded_forms_need_their_exact_width() {
        let e = parse("0IbQ3Nem0H", Format::Base62).unwrap_err();
        assert_eq!(
            e.to_string(),
            "\"0IbQ3Nem0H\" is not a base62 ID: it has 10 characters, a base62 ID has 11"
        );
        assert!(e.hint().starts_with("base62 IDs are exactly 11 characters"));
        assert!(parse("ff", Format::Hex).is_err());
        assert!(parse("Z", Format::Base32).is_err());
        // Decimal accepts the unpadded `id::text` too.
        assert_eq!(parse("42", Format::Decimal), Ok(42));
        assert_eq!(parse("0", Format::Decimal), Ok(0));
    }

    #[test]
    fn case_rules() {
        assert_eq!(parse("7zzzzzzzzzzzz", Format::Base32), Ok(i64::MAX));
        assert_eq!(parse("7FFFFFFFFFFFFFFF", Format::Hex), Ok(i64::MAX));
        // base62 is case-sensitive: a and A are different digits.
        assert_eq!(parse("0000000000a", Format::Base62), Ok(36));
        assert_eq!(parse("0000000000A", Format::Base62), Ok(10));
    }

    #[test]
    fn alphabets_are_in_ascii_order_and_crockford_has_no_ilou() {
        for f in FORMATS {
            assert!(f.alphabet().windows(2).all(|w| w[0] < w[1]), "{f}");
        }
        assert!(!BASE32.iter().any(|c| b"ILOU".contains(c)));
    }

    fn any_format() -> impl Strategy<Value = Format> {
        prop::sample::select(FORMATS.to_vec())
    }

    proptest! {
        #[test]
        fn round_trip(id in 0..=i64::MAX, f in any_format()) {
            let text = encode(id, f).unwrap();
            prop_assert_eq!(text.len(), f.width());
            prop_assert_eq!(parse(&text, f), Ok(id));
            if f.case_insensitive() {
                prop_assert_eq!(parse(&text.to_ascii_lowercase(), f), Ok(id));
                prop_assert_eq!(parse(&text.to_ascii_uppercase(), f), Ok(id));
            }
        }

        #[test]
        fn text_order_is_numeric_order(a in 0..=i64::MAX, b in 0..=i64::MAX, f in any_format()) {
            let (ta, tb) = (encode(a, f).unwrap(), encode(b, f).unwrap());
            prop_assert_eq!(ta.as_bytes().cmp(tb.as_bytes()), a.cmp(&b));
        }

        #[test]
        fn small_ids_order_too(a in 0..100_000i64, b in 0..100_000i64, f in any_format()) {
            let (ta, tb) = (encode(a, f).unwrap(), encode(b, f).unwrap());
            prop_assert_eq!(ta.cmp(&tb), a.cmp(&b));
        }

        /// Whatever the text, parsing either fails or returns the one ID whose
        /// canonical text it is (up to case where case does not matter, and
        /// leading zeros for decimal): never another ID.
        #[test]
        fn any_accepted_text_is_the_ids_text(text in "[0-9A-Za-z+ -]{0,21}", f in any_format()) {
            if let Ok(id) = parse(&text, f) {
                prop_assert!(id >= 0);
                let canonical = encode(id, f).unwrap();
                match f {
                    Format::Decimal => prop_assert_eq!(canonical.trim_start_matches('0'), text.trim_start_matches('0')),
                    Format::Base62 => prop_assert_eq!(canonical, text),
                    _ => prop_assert!(canonical.eq_ignore_ascii_case(&text)),
                }
            }
        }

        #[test]
        fn encode_matches_rust_formatting(id in 0..=i64::MAX) {
            prop_assert_eq!(encode(id, Format::Hex).unwrap(), format!("{id:016x}"));
            prop_assert_eq!(encode(id, Format::Decimal).unwrap(), format!("{id:019}"));
        }
    }
}
