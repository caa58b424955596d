//! How a server proves to the registry that a call is its own, without
//! sending anything an onlooker could use again (the registry's
//! `claim_keyed()`, `renew_signed()`, `release_signed()`, `resume_signed()`;
//! `registry/snowflake_registry.sql` says why this holds).
//!
//! A claim names the hash of a new random secret ([`secret_hash`]); its
//! answer carries the claim's signing key. Every later call of the claim
//! names a call number above the last and a proof ([`proof`]) over the
//! call's text ([`SignedCall::text`]): sha256(key || hex(sha256(text))),
//! a fixed-length input, so no proof of one text extends to another. The
//! registry computes the same in SQL (`signed_token()`); the
//! tests below hold both to one vector.

use sha2::{Digest, Sha256};

/// A call of a keyed claim, with its arguments (ms in the fleet's time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignedCall {
    Renew {
        holder_now_ms: u64,
        grant_ms: u64,
    },
    Release {
        issued_until_ms: u64,
    },
    Resume {
        held_until_ms: u64,
        holder_now_ms: u64,
        grant_ms: u64,
    },
}

impl SignedCall {
    /// The registry function's name and the call's arguments, in its order.
    fn parts(&self) -> (&'static str, Vec<u64>) {
        match *self {
            SignedCall::Renew {
                holder_now_ms,
                grant_ms,
            } => ("renew", vec![holder_now_ms, grant_ms]),
            SignedCall::Release { issued_until_ms } => ("release", vec![issued_until_ms]),
            SignedCall::Resume {
                held_until_ms,
                holder_now_ms,
                grant_ms,
            } => ("resume", vec![held_until_ms, holder_now_ms, grant_ms]),
        }
    }

    /// The arguments as the registry function takes them after the call
    /// number (before the proof).
    pub fn arguments(&self) -> Vec<u64> {
        self.parts().1
    }

    /// The text the proof covers: the function, node id, claim, call
    /// number, arguments and fleet, joined by '|' (the fleet last: the one
    /// field that may hold a '|'), as the registry's `signed_token()`.
    pub fn text(&self, fleet: &str, node_id: u64, claim_id: i64, call: u64) -> String {
        let (function, args) = self.parts();
        let mut text = format!("{function}|{node_id}|{claim_id}|{call}");
        for a in args {
            text.push('|');
            text.push_str(&a.to_string());
        }
        text.push('|');
        text.push_str(fleet);
        text
    }
}

/// Bytes as lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

/// What a claim names of its secret (hex text): its SHA-256, in hex.
pub fn secret_hash(secret_hex: &str) -> String {
    sha256_hex(secret_hex.as_bytes())
}

/// The proof of a call's text under the claim's signing key (hex, as the
/// registry's answer gave it).
pub fn proof(key_hex: &str, text: &str) -> String {
    let inner = sha256_hex(text.as_bytes());
    sha256_hex(format!("{key_hex}{inner}").as_bytes())
}

/// Whether a signing key is one the registry gives: 32 lower-case hex
/// digits (128 bits). Any other answer is refused, never used.
pub fn is_signing_key(key: &str) -> bool {
    key.len() == 32
        && key
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_registry_computes_the_same_proof() {
        // From PostgreSQL 15, as the registry's signed_token() computes it:
        // concat_ws('|', 'renew', 3, 42, 7, '100|200', 'f|x') and its proof
        // under the key 00112233445566778899aabbccddeeff.
        let call = SignedCall::Renew {
            holder_now_ms: 100,
            grant_ms: 200,
        };
        let text = call.text("f|x", 3, 42, 7);
        assert_eq!(text, "renew|3|42|7|100|200|f|x");
        assert_eq!(
            proof("00112233445566778899aabbccddeeff", &text),
            "2df5673ceb7eee07cb406963f6a7e1f92012ed0b9f84f367d3bb135cf8f735b9"
        );
        // encode(sha256(convert_to('secret-two-0123456789', 'UTF8')), 'hex')
        assert_eq!(
            secret_hash("secret-two-0123456789"),
            "0db479fe292d2376023922716132d68b5a63cc94ed13c2f969f78f872ca45e27"
        );
    }

    #[test]
    fn texts_of_each_call() {
        let release = SignedCall::Release { issued_until_ms: 9 };
        assert_eq!(release.text("default", 1, 2, 3), "release|1|2|3|9|default");
        assert_eq!(release.arguments(), vec![9]);
        let resume = SignedCall::Resume {
            held_until_ms: 4,
            holder_now_ms: 5,
            grant_ms: 6,
        };
        assert_eq!(resume.text("a", 1, 2, 3), "resume|1|2|3|4|5|6|a");
    }

    #[test]
    fn signing_keys() {
        assert!(is_signing_key("00112233445566778899aabbccddeeff"));
        assert!(!is_signing_key("00112233445566778899AABBCCDDEEFF"));
        assert!(!is_signing_key("0011"));
        assert!(!is_signing_key(""));
    }

    proptest! {
        // A proof holds for one call only: another number, argument, node,
        // claim or fleet gives another proof.
        #[test]
        fn a_proof_is_bound_to_its_call(call in 0u64..1_000_000, now in 0u64..1 << 42,
                                        grant in 1u64..3_600_000, other in 0u64..1_000_000,
                                        fleet in "[a-z|]{1,8}") {
            let key = "0f1e2d3c4b5a69788796a5b4c3d2e1f0";
            let renew = SignedCall::Renew { holder_now_ms: now, grant_ms: grant };
            let p = proof(key, &renew.text(&fleet, 1, 2, call));
            prop_assume!(other != call);
            prop_assert_ne!(&p, &proof(key, &renew.text(&fleet, 1, 2, other)));
            let longer = SignedCall::Renew { holder_now_ms: now, grant_ms: grant + 1 };
            prop_assert_ne!(&p, &proof(key, &longer.text(&fleet, 1, 2, call)));
            prop_assert_ne!(&p, &proof(key, &renew.text(&fleet, 2, 2, call)));
            prop_assert_ne!(&p, &proof(key, &renew.text(&fleet, 1, 3, call)));
            prop_assert_ne!(&p, &proof(key, &renew.text(&format!("{fleet}x"), 1, 2, call)));
            prop_assert_ne!(&p, &proof("0f1e2d3c4b5a69788796a5b4c3d2e1f1", &renew.text(&fleet, 1, 2, call)));
        }
    }
}
