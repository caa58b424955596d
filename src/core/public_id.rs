//! Public IDs: a keyed permutation of the IDs that shows outsiders nothing.
//!
//! An ID tells whoever sees it when its row was made, on which server, and
//! through the sequence how many rows that server made in that millisecond.
//! A public ID is the ID passed through a keyed, format-preserving
//! permutation of the non-negative 63-bit integers (every ID is one):
//! NIST SP 800-38G FF1 with AES-256, radix 2, 63 numerals, the ID's bits
//! most significant first, an empty tweak (the `fpe` crate's FF1). Without
//! the key, public IDs of consecutive IDs are unrelated numbers: neither
//! the time, the node, the order nor the count shows. With it, the ID comes
//! back exactly. The same key gives the same public ID on every server, so
//! a fleet shares one.
//!
//! Keys have versions, so that a key can be retired: a key ring is a text
//! file of lines `<version> <64 hex digits>` (an AES-256 key), versions 1 to
//! [`MAX_KEY_VERSION`]. A version's key never changes (stored public IDs
//! and indexes over them would change meaning); rotating adds a version.
//! The bigint form does not carry the version (all 63 bits are the
//! permuted ID); the text form does: [`PUBLIC_TEXT_WIDTH`] characters, the
//! version as one base62 digit, then the public ID as 11 base62 digits,
//! so a text form made under any version still in the ring reads back.
//!
//! The crate's FF1 does the Feistel rounds and the AES-based PRF; the
//! numeral string it runs on is [`Bits63`], the 63 bits in a `u64` with the
//! two operations FF1 needs on a half (its value as bytes, and adding or
//! subtracting a PRF output modulo 2^m) in integer arithmetic. The crate's
//! own general numeral string (`FlexibleNumeralString`, a vector of numerals
//! and big-integer arithmetic) gives the same results about fifty times
//! slower; the tests compare the two.
//!
//! This module is pure (no file access): the pgrx layer reads the file and
//! checks its permissions with [`check_key_file_mode`].

use crate::core::text_forms::{self, Format, TextFormError};
use aes::Aes256;
use fpe::ff1::{NumeralString, Operations, FF1};
use std::collections::BTreeMap;

/// Bytes of a key (AES-256).
pub const KEY_BYTES: usize = 32;
/// The largest key version: one base62 digit in the text form, 0 unused.
pub const MAX_KEY_VERSION: u8 = 61;
/// Bits of an ID and of a public ID: every non-negative `bigint`.
pub const ID_BITS: usize = 63;
/// Characters of the text form: the version, then 11 base62 digits.
pub const PUBLIC_TEXT_WIDTH: usize = 12;

/// Why an ID, a public ID or its text cannot be turned into the other.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublicIdError {
    #[error("{0} is not an ID: IDs and public IDs are never negative")]
    Negative(i64),
    #[error("key version {0} is out of range: versions are 1 to {MAX_KEY_VERSION}")]
    VersionOutOfRange(i64),
    #[error("\"{text}\" is not a public ID: it has {len} characters, a public ID has {PUBLIC_TEXT_WIDTH}")]
    TextLength { text: String, len: usize },
    #[error(
        "\"{text}\" is not a public ID: character {position} ({character:?}) is not a base62 digit"
    )]
    TextDigit {
        text: String,
        position: usize,
        character: char,
    },
    #[error("\"{text}\" is not a public ID: its version digit is 0")]
    TextVersionZero { text: String },
    #[error("\"{text}\" is not a public ID: its value is above 2^63 - 1")]
    TextOverflow { text: String },
}

/// What kind of error, for the SQLSTATE the SQL layer reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublicIdErrorKind {
    /// A negative ID or public ID, a text above 2^63 - 1 (`22003`).
    OutOfRange,
    /// A key version outside 1 to 61 (`22023`).
    BadVersion,
    /// Text that is not a public ID (`22P02`).
    BadText,
}

impl PublicIdError {
    pub fn kind(&self) -> PublicIdErrorKind {
        match self {
            PublicIdError::Negative(_) | PublicIdError::TextOverflow { .. } => {
                PublicIdErrorKind::OutOfRange
            }
            PublicIdError::VersionOutOfRange(_) => PublicIdErrorKind::BadVersion,
            PublicIdError::TextLength { .. }
            | PublicIdError::TextDigit { .. }
            | PublicIdError::TextVersionZero { .. } => PublicIdErrorKind::BadText,
        }
    }

    /// How to fix it, for the error's HINT.
    pub fn hint(&self) -> String {
        match self {
            PublicIdError::Negative(_) => {
                "Pass an ID made by snowflake_next(), or a public ID made by snowflake_public()."
                    .to_string()
            }
            PublicIdError::VersionOutOfRange(_) => {
                "Name a key version of the key file (snowflake_id.public_id_keys).".to_string()
            }
            PublicIdError::TextLength { .. }
            | PublicIdError::TextDigit { .. }
            | PublicIdError::TextVersionZero { .. }
            | PublicIdError::TextOverflow { .. } => format!(
                "A public ID's text is {PUBLIC_TEXT_WIDTH} characters of 0-9, A-Z and a-z (case matters), as snowflake_public_text() writes it; was it cut or mistyped?"
            ),
        }
    }
}

/// A key version, checked: 1 to [`MAX_KEY_VERSION`].
pub fn key_version(version: i64) -> Result<u8, PublicIdError> {
    match u8::try_from(version) {
        Ok(v) if (1..=MAX_KEY_VERSION).contains(&v) => Ok(v),
        _ => Err(PublicIdError::VersionOutOfRange(version)),
    }
}

/// The permutation under one key. Holds the expanded AES key: make one per
/// key and keep it.
pub struct PublicIdCipher {
    ff1: FF1<Aes256>,
}

impl PublicIdCipher {
    pub fn new(key: &[u8; KEY_BYTES]) -> PublicIdCipher {
        let ff1 = match FF1::<Aes256>::new(key, 2) {
            Ok(ff1) => ff1,
            // FF1 takes radixes 2 to 2^16: 2 is always one.
            Err(_) => unreachable!("FF1 accepts radix 2"),
        };
        PublicIdCipher { ff1 }
    }

    /// The public ID of `id` (0 to 2^63 - 1): a value in the same range.
    pub fn hide(&self, id: i64) -> Result<i64, PublicIdError> {
        if id < 0 {
            return Err(PublicIdError::Negative(id));
        }
        Ok(self.permute(id, true))
    }

    /// The ID whose public ID is `public_id`: the inverse of [`Self::hide`].
    pub fn reveal(&self, public_id: i64) -> Result<i64, PublicIdError> {
        if public_id < 0 {
            return Err(PublicIdError::Negative(public_id));
        }
        Ok(self.permute(public_id, false))
    }

    fn permute(&self, value: i64, forward: bool) -> i64 {
        let bits = Bits63(value as u64);
        let result = if forward {
            self.ff1.encrypt(&[], &bits)
        } else {
            self.ff1.decrypt(&[], &bits)
        };
        match result {
            // Bits63 holds 63 bits: the result fits in a non-negative i64.
            Ok(out) => out.0 as i64,
            // A value below 2^63 is a valid radix-2 string, and 63 numerals
            // are within FF1's lengths (2^63 >= 1,000,000).
            Err(_) => unreachable!("63 binary numerals are a valid FF1 input"),
        }
    }
}

/// An FF1 numeral string of 63 binary numerals, most significant first: the
/// bits of a value below 2^63.
struct Bits63(u64);

/// One half of a [`Bits63`] during the rounds: its `bits` numerals (31 or
/// 32) as a number.
struct Half {
    value: u64,
    bits: usize,
}

/// A half's value as FF1's big-endian bytes (at most 8).
struct BeBytes {
    buf: [u8; 8],
    len: usize,
}

impl AsRef<[u8]> for BeBytes {
    fn as_ref(&self) -> &[u8] {
        &self.buf[8 - self.len..]
    }
}

/// `2^m - 1` for `m` up to 63.
fn low_bits(m: usize) -> u64 {
    (1u64 << m) - 1
}

/// The number a PRF output's bytes spell, big-endian, modulo 2^64: enough
/// for a sum modulo 2^m with m at most 32.
fn wrapping_number(bytes: impl Iterator<Item = u8>) -> u64 {
    bytes.fold(0u64, |acc, b| (acc << 8) | u64::from(b))
}

impl NumeralString for Bits63 {
    type Ops = Half;

    fn is_valid(&self, radix: u32) -> bool {
        radix == 2 && self.0 >> ID_BITS == 0
    }

    fn numeral_count(&self) -> usize {
        ID_BITS
    }

    /// A = the first u = 31 numerals (the high bits), B = the other 32.
    fn split(&self) -> (Half, Half) {
        let v = ID_BITS - ID_BITS / 2;
        (
            Half {
                value: self.0 >> v,
                bits: ID_BITS / 2,
            },
            Half {
                value: self.0 & low_bits(v),
                bits: v,
            },
        )
    }

    fn concat(a: Half, b: Half) -> Bits63 {
        Bits63((a.value << b.bits) | b.value)
    }
}

impl Operations for Half {
    type Bytes = BeBytes;

    fn numeral_count(&self) -> usize {
        self.bits
    }

    /// STR^b_256(NUM_2(X)): b is ceil(bits / 8), at most 4 here.
    fn to_be_bytes(&self, _radix: u32, b: usize) -> BeBytes {
        BeBytes {
            buf: self.value.to_be_bytes(),
            len: b.min(8),
        }
    }

    fn add_mod_exp(self, other: impl Iterator<Item = u8>, _radix: u32, m: usize) -> Half {
        Half {
            value: self.value.wrapping_add(wrapping_number(other)) & low_bits(m),
            bits: m,
        }
    }

    fn sub_mod_exp(self, other: impl Iterator<Item = u8>, _radix: u32, m: usize) -> Half {
        Half {
            value: self.value.wrapping_sub(wrapping_number(other)) & low_bits(m),
            bits: m,
        }
    }
}

/// The text form: the version digit, then the public ID in 11 base62 digits.
pub fn public_text(version: u8, public_id: i64) -> Result<String, PublicIdError> {
    let version = key_version(i64::from(version))?;
    let digits = text_forms::encode(public_id, Format::Base62).map_err(|e| match e {
        TextFormError::NegativeId(v) => PublicIdError::Negative(v),
        _ => unreachable!("base62 writes every non-negative bigint"),
    })?;
    let mut text = String::with_capacity(PUBLIC_TEXT_WIDTH);
    text.push(char::from(Format::Base62.alphabet()[usize::from(version)]));
    text.push_str(&digits);
    Ok(text)
}

/// Reads a text form: its key version and public ID.
pub fn parse_public_text(text: &str) -> Result<(u8, i64), PublicIdError> {
    let shown = || text_forms::excerpt(text);
    let len = text.chars().count();
    // A bad character first (as text_forms does): it says more than a length.
    if let Some((i, c)) = text
        .chars()
        .enumerate()
        .find(|(_, c)| !c.is_ascii_alphanumeric())
    {
        return Err(PublicIdError::TextDigit {
            text: shown(),
            position: i + 1,
            character: c,
        });
    }
    if len != PUBLIC_TEXT_WIDTH {
        return Err(PublicIdError::TextLength { text: shown(), len });
    }
    let first = text.as_bytes()[0];
    let version = Format::Base62
        .digit_value(first)
        .and_then(|v| u8::try_from(v).ok())
        .unwrap_or(0);
    if version == 0 {
        return Err(PublicIdError::TextVersionZero { text: shown() });
    }
    let public_id = text_forms::parse(&text[1..], Format::Base62).map_err(|e| match e {
        TextFormError::Overflow { .. } => PublicIdError::TextOverflow { text: shown() },
        _ => PublicIdError::TextDigit {
            text: shown(),
            position: 1,
            character: char::from(first),
        },
    })?;
    Ok((version, public_id))
}

/// Why a key file cannot be used. Messages never quote a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyFileError {
    #[error("line {line}: {what}")]
    Syntax { line: usize, what: String },
    #[error("line {line}: key version {version} is given twice")]
    DuplicateVersion { line: usize, version: u8 },
    #[error("the key file has no key")]
    Empty,
    #[error("the key file can be read by others than its owner (mode {mode:04o})")]
    Permissions { mode: u32 },
}

impl KeyFileError {
    /// How to fix it, for the error's HINT.
    pub fn hint(&self) -> String {
        match self {
            KeyFileError::Syntax { .. } | KeyFileError::Empty => format!(
                "Each line of the key file is a version (1 to {MAX_KEY_VERSION}), a space and 64 hex digits (a key from \"openssl rand -hex 32\"); \"#\" starts a comment."
            ),
            KeyFileError::DuplicateVersion { .. } => {
                "Give each version one key, and never change a version's key: add a version instead."
                    .to_string()
            }
            KeyFileError::Permissions { .. } => {
                "Make the file readable by the server's operating system user alone: chmod 0600."
                    .to_string()
            }
        }
    }
}

/// Refuses a key file that others than its owner may read or write (a
/// mode with any group or other bit), as PostgreSQL refuses such an SSL key.
pub fn check_key_file_mode(mode: u32) -> Result<(), KeyFileError> {
    if mode & 0o077 != 0 {
        return Err(KeyFileError::Permissions {
            mode: mode & 0o7777,
        });
    }
    Ok(())
}

/// The keys of a key file, by version.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyRing {
    keys: BTreeMap<u8, [u8; KEY_BYTES]>,
}

// Never print a key, not even in a debug message.
impl std::fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyRing {{ versions: {:?} }}", self.versions())
    }
}

impl KeyRing {
    /// Reads a key file's text: lines `<version> <64 hex digits>`, blank
    /// lines and `#` comments.
    pub fn parse(text: &str) -> Result<KeyRing, KeyFileError> {
        let mut keys = BTreeMap::new();
        for (n, raw) in text.lines().enumerate() {
            let line = n + 1;
            let content = raw.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            let mut fields = content.split_whitespace();
            let (Some(version), Some(key), None) = (fields.next(), fields.next(), fields.next())
            else {
                return Err(KeyFileError::Syntax {
                    line,
                    what: "expected a version and a key, separated by a space".to_string(),
                });
            };
            let version = version
                .parse::<i64>()
                .ok()
                .and_then(|v| key_version(v).ok())
                .ok_or_else(|| KeyFileError::Syntax {
                    line,
                    what: format!("the version is not a number from 1 to {MAX_KEY_VERSION}"),
                })?;
            let key = parse_hex_key(key).ok_or_else(|| KeyFileError::Syntax {
                line,
                what: format!(
                    "the key of version {version} is not {} hex digits",
                    KEY_BYTES * 2
                ),
            })?;
            if keys.insert(version, key).is_some() {
                return Err(KeyFileError::DuplicateVersion { line, version });
            }
        }
        if keys.is_empty() {
            return Err(KeyFileError::Empty);
        }
        Ok(KeyRing { keys })
    }

    pub fn key(&self, version: u8) -> Option<&[u8; KEY_BYTES]> {
        self.keys.get(&version)
    }

    /// The versions, in increasing order.
    pub fn versions(&self) -> Vec<u8> {
        self.keys.keys().copied().collect()
    }
}

fn parse_hex_key(text: &str) -> Option<[u8; KEY_BYTES]> {
    if text.len() != KEY_BYTES * 2 || !text.is_ascii() {
        return None;
    }
    let mut key = [0u8; KEY_BYTES];
    for (i, byte) in key.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fpe::ff1::FlexibleNumeralString;
    use proptest::prelude::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn numerals(s: &str, radix: u32) -> Vec<u16> {
        s.chars()
            .map(|c| c.to_digit(radix).unwrap() as u16)
            .collect()
    }

    /// NIST's FF1 samples (SP 800-38G, "FF1samples.pdf"): all nine, AES-128,
    /// -192 and -256, radix 10 and 36, with and without a tweak. They check
    /// the crate's FF1, which the permutation here is a use of.
    #[test]
    fn ff1_gives_nists_samples() {
        use aes::{Aes128, Aes192};
        let k128 = "2B7E151628AED2A6ABF7158809CF4F3C";
        let k192 = "2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F";
        let k256 = "2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F7F036D6F04FC6A94";
        let t10 = "39383736353433323130";
        let t36 = "3737373770717273373737";
        let samples: [(&str, u32, &str, &str, &str); 9] = [
            (k128, 10, "", "0123456789", "2433477484"),
            (k128, 10, t10, "0123456789", "6124200773"),
            (k128, 36, t36, "0123456789abcdefghi", "a9tv40mll9kdu509eum"),
            (k192, 10, "", "0123456789", "2830668132"),
            (k192, 10, t10, "0123456789", "2496655549"),
            (k192, 36, t36, "0123456789abcdefghi", "xbj3kv35jrawxv32ysr"),
            (k256, 10, "", "0123456789", "6657667009"),
            (k256, 10, t10, "0123456789", "1001623463"),
            (k256, 36, t36, "0123456789abcdefghi", "xs8a0azh2avyalyzuwd"),
        ];
        for (n, (key, radix, tweak, pt, ct)) in samples.into_iter().enumerate() {
            let (key, tweak) = (hex(key), hex(tweak));
            let x = FlexibleNumeralString::from(numerals(pt, radix));
            let (got, back) = match key.len() {
                16 => {
                    let f = FF1::<Aes128>::new(&key, radix).unwrap();
                    let y = f.encrypt(&tweak, &x).unwrap();
                    let z = f.decrypt(&tweak, &y).unwrap();
                    (Vec::from(y), Vec::from(z))
                }
                24 => {
                    let f = FF1::<Aes192>::new(&key, radix).unwrap();
                    let y = f.encrypt(&tweak, &x).unwrap();
                    let z = f.decrypt(&tweak, &y).unwrap();
                    (Vec::from(y), Vec::from(z))
                }
                _ => {
                    let f = FF1::<Aes256>::new(&key, radix).unwrap();
                    let y = f.encrypt(&tweak, &x).unwrap();
                    let z = f.decrypt(&tweak, &y).unwrap();
                    (Vec::from(y), Vec::from(z))
                }
            };
            assert_eq!(got, numerals(ct, radix), "NIST sample #{}", n + 1);
            assert_eq!(
                back,
                numerals(pt, radix),
                "NIST sample #{} decrypted",
                n + 1
            );
        }
    }

    const KEY: [u8; KEY_BYTES] = [7; KEY_BYTES];

    /// The permutation through the crate's own general numeral string: 63
    /// numerals 0 and 1, most significant first, big-integer arithmetic.
    fn reference_hide(key: &[u8; KEY_BYTES], id: u64, forward: bool) -> u64 {
        let f = FF1::<Aes256>::new(key, 2).unwrap();
        let bits: Vec<u16> = (0..ID_BITS).rev().map(|i| ((id >> i) & 1) as u16).collect();
        let x = FlexibleNumeralString::from(bits);
        let y = if forward {
            f.encrypt(&[], &x)
        } else {
            f.decrypt(&[], &x)
        }
        .unwrap();
        Vec::from(y)
            .iter()
            .fold(0u64, |acc, &b| (acc << 1) | u64::from(b))
    }

    #[test]
    fn bits63_gives_the_crates_own_numeral_string_results_at_the_edges() {
        let c = PublicIdCipher::new(&KEY);
        for id in [
            0i64,
            1,
            2,
            (1 << 31) - 1,
            1 << 31,
            (1 << 32) - 1,
            1 << 32,
            i64::MAX,
        ] {
            assert_eq!(
                c.hide(id).unwrap() as u64,
                reference_hide(&KEY, id as u64, true),
                "{id}"
            );
            assert_eq!(
                c.reveal(id).unwrap() as u64,
                reference_hide(&KEY, id as u64, false),
                "{id}"
            );
        }
    }

    #[test]
    fn negative_values_are_refused() {
        let c = PublicIdCipher::new(&KEY);
        assert_eq!(c.hide(-1), Err(PublicIdError::Negative(-1)));
        assert_eq!(c.reveal(i64::MIN), Err(PublicIdError::Negative(i64::MIN)));
        assert_eq!(
            PublicIdError::Negative(-1).kind(),
            PublicIdErrorKind::OutOfRange
        );
    }

    #[test]
    fn the_ends_of_the_range_map_into_it_and_back() {
        let c = PublicIdCipher::new(&KEY);
        for id in [0, 1, i64::MAX, i64::MAX - 1] {
            let p = c.hide(id).unwrap();
            assert!(p >= 0);
            assert_eq!(c.reveal(p).unwrap(), id);
        }
    }

    #[test]
    fn another_key_gives_another_permutation() {
        let a = PublicIdCipher::new(&KEY);
        let b = PublicIdCipher::new(&[8; KEY_BYTES]);
        let id = 252_172_774_628_397_056;
        assert_ne!(a.hide(id).unwrap(), b.hide(id).unwrap());
    }

    proptest! {
        #[test]
        fn bits63_gives_the_crates_own_numeral_string_results(
            id in 0i64..=i64::MAX,
            key in proptest::array::uniform32(any::<u8>()),
        ) {
            let c = PublicIdCipher::new(&key);
            prop_assert_eq!(c.hide(id).unwrap() as u64, reference_hide(&key, id as u64, true));
            prop_assert_eq!(c.reveal(id).unwrap() as u64, reference_hide(&key, id as u64, false));
        }

        #[test]
        fn reveal_inverts_hide(id in 0i64..=i64::MAX, key in proptest::array::uniform32(any::<u8>())) {
            let c = PublicIdCipher::new(&key);
            let p = c.hide(id).unwrap();
            prop_assert!(p >= 0);
            prop_assert_eq!(c.reveal(p).unwrap(), id);
        }

        #[test]
        fn text_form_round_trips(version in 1u8..=MAX_KEY_VERSION, public in 0i64..=i64::MAX) {
            let t = public_text(version, public).unwrap();
            prop_assert_eq!(t.len(), PUBLIC_TEXT_WIDTH);
            prop_assert_eq!(parse_public_text(&t).unwrap(), (version, public));
        }
    }

    #[test]
    fn text_form_is_the_version_digit_and_eleven_base62_digits() {
        assert_eq!(public_text(1, 0).unwrap(), "100000000000");
        assert_eq!(public_text(61, i64::MAX).unwrap(), "zAzL8n0Y58m7");
        assert_eq!(public_text(10, 61).unwrap(), "A0000000000z");
        assert_eq!(public_text(0, 5), Err(PublicIdError::VersionOutOfRange(0)));
        assert_eq!(
            public_text(62, 5),
            Err(PublicIdError::VersionOutOfRange(62))
        );
    }

    #[test]
    fn bad_text_forms_are_refused_with_the_reason() {
        let e = parse_public_text("1000").unwrap_err();
        assert!(
            matches!(e, PublicIdError::TextLength { len: 4, .. }),
            "{e:?}"
        );
        let e = parse_public_text("10000000000-0").unwrap_err();
        assert!(
            matches!(
                e,
                PublicIdError::TextDigit {
                    position: 12,
                    character: '-',
                    ..
                }
            ),
            "{e:?}"
        );
        let e = parse_public_text("000000000001").unwrap_err();
        assert!(matches!(e, PublicIdError::TextVersionZero { .. }), "{e:?}");
        let e = parse_public_text("1zzzzzzzzzzz").unwrap_err();
        assert!(matches!(e, PublicIdError::TextOverflow { .. }), "{e:?}");
        assert_eq!(e.kind(), PublicIdErrorKind::OutOfRange);
        let e = parse_public_text("").unwrap_err();
        assert!(
            matches!(e, PublicIdError::TextLength { len: 0, .. }),
            "{e:?}"
        );
        assert_eq!(e.kind(), PublicIdErrorKind::BadText);
        let long = "1".repeat(1000);
        let e = parse_public_text(&long).unwrap_err();
        assert!(
            e.to_string().len() < 200,
            "the message quotes a bounded excerpt"
        );
    }

    #[test]
    fn key_versions_are_1_to_61() {
        assert_eq!(key_version(1), Ok(1));
        assert_eq!(key_version(61), Ok(61));
        for v in [0, 62, -1, 256, i64::MAX] {
            assert_eq!(key_version(v), Err(PublicIdError::VersionOutOfRange(v)));
        }
    }

    const HEX_A: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";
    const HEX_B: &str = "FFEEDDCCBBAA99887766554433221100FFEEDDCCBBAA99887766554433221100";

    #[test]
    fn a_key_file_is_versions_and_hex_keys_with_comments() {
        let ring = KeyRing::parse(&format!(
            "# keys\n\n1 {HEX_A}\n  7\t{HEX_B}   # the second\n"
        ))
        .unwrap();
        assert_eq!(ring.versions(), vec![1, 7]);
        assert_eq!(ring.key(1).unwrap()[31], 0x1f);
        assert_eq!(ring.key(7).unwrap()[0], 0xff);
        assert!(ring.key(2).is_none());
        assert!(
            !format!("{ring:?}").contains("1f"),
            "Debug never shows a key"
        );
    }

    #[test]
    fn bad_key_files_are_refused_by_line_without_quoting_the_key() {
        let cases = [
            (
                format!("1 {HEX_A}\n1 {HEX_B}\n"),
                "line 2: key version 1 is given twice",
            ),
            (
                format!("0 {HEX_A}\n"),
                "line 1: the version is not a number from 1 to 61",
            ),
            (
                format!("62 {HEX_A}\n"),
                "line 1: the version is not a number from 1 to 61",
            ),
            (
                format!("1 {}\n", &HEX_A[1..]),
                "line 1: the key of version 1 is not 64 hex digits",
            ),
            (
                format!("1 {}zz\n", &HEX_A[2..]),
                "line 1: the key of version 1 is not 64 hex digits",
            ),
            (
                format!("\n\n1 {HEX_A} extra\n"),
                "line 3: expected a version and a key, separated by a space",
            ),
            (
                format!("1\n{HEX_A}\n"),
                "line 1: expected a version and a key, separated by a space",
            ),
            ("# nothing\n\n".to_string(), "the key file has no key"),
        ];
        for (text, want) in cases {
            let e = KeyRing::parse(&text).unwrap_err();
            assert_eq!(e.to_string(), want, "{text:?}");
            assert!(!e.to_string().contains(&HEX_A[..16]) && !e.hint().contains(&HEX_A[..16]));
        }
    }

    #[test]
    fn a_key_file_others_can_read_is_refused() {
        assert_eq!(check_key_file_mode(0o100600), Ok(()));
        assert_eq!(check_key_file_mode(0o400), Ok(()));
        assert_eq!(
            check_key_file_mode(0o100640),
            Err(KeyFileError::Permissions { mode: 0o640 })
        );
        assert!(check_key_file_mode(0o604).is_err());
        assert!(check_key_file_mode(0o620).is_err());
    }
}
