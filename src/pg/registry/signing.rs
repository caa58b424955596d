//! What the registry worker sends to prove a call is its claim's, and
//! nothing an onlooker could use again (`crate::core::call_proof`): the
//! hash of a new secret for each claim sent (the secret of one sent before
//! without an answer revealed, so that the registry repeats that claim's
//! answer), the signing key from the claim's answer, and a call number and
//! proof for each renewal, resumption and release.

use super::answer::{parse_grant, unrightful};
use super::identity::random_secret;
use super::libpq::CallError;
use super::worker::ClaimWorker;
use super::ClaimState;
use crate::core::call_proof::{hex, is_signing_key, proof, secret_hash, SignedCall};
use crate::core::registry::{Asked, Grant};
use crate::pg::settings;

/// How many unanswered claims' secrets a claim reveals at most (the
/// registry takes up to 16).
const MAX_REVEALED: usize = 16;

impl ClaimWorker {
    /// For a claim about to be sent: the hash of its new secret, and the
    /// secrets of the claims sent before that have no answer yet (lost, or
    /// refused), as a text array, which the registry answers as the one of
    /// them that was made. The new secret is kept first: if this claim's
    /// answer is lost too, the next one reveals it. (The last 16: a claim
    /// made by an older one is left to end with its grant.)
    pub(super) fn claim_secrets(&mut self) -> (String, Option<String>) {
        let secret = random_secret();
        let previous = (!self.unanswered.is_empty()).then(|| {
            let listed: Vec<String> = self.unanswered.iter().map(|s| hex(s)).collect();
            format!("{{{}}}", listed.join(","))
        });
        if self.unanswered.len() == MAX_REVEALED {
            self.unanswered.remove(0);
        }
        self.unanswered.push(secret);
        (secret_hash(&hex(&secret)), previous)
    }

    /// A claim the registry refused with an error (its transaction rolled
    /// back: no claim was made) is not revealed later: its secret is
    /// forgotten, so a claim someone else made under its hash (seen in a
    /// log while this one waited) is never answered to this server. One
    /// whose outcome is unknown (no answer) stays to be revealed.
    pub(super) fn forget_if_refused(&mut self, e: &CallError) {
        if matches!(e, CallError::Refused { .. }) {
            self.unanswered.pop();
        }
    }

    /// A claim's answer, checked (the grant, and the signing key): once
    /// answered, the next claim names a new secret and reveals none.
    pub(super) fn answered(
        &mut self,
        rows: &[Vec<Option<String>>],
        asked: &Asked,
    ) -> Result<Grant, CallError> {
        let grant = parse_grant(rows, asked)?;
        self.key = answered_key(rows)?;
        self.unanswered.clear();
        self.first_asked = None;
        Ok(grant)
    }

    /// The arguments of a signed call of the claim `grant`: fleet, node
    /// id, claim, call number, the call's own arguments, and its proof.
    pub(super) fn signed(
        &self,
        state: &ClaimState,
        grant: &Grant,
        call: SignedCall,
    ) -> Vec<Option<String>> {
        let fleet = settings::registry_fleet();
        let number = state.next_call_number();
        let text = call.text(&fleet, grant.node_id, grant.claim_id, number);
        let mut params = vec![
            Some(fleet),
            Some(grant.node_id.to_string()),
            Some(grant.claim_id.to_string()),
            Some(number.to_string()),
        ];
        params.extend(call.arguments().iter().map(|a| Some(a.to_string())));
        params.push(Some(proof(&hex(&self.key), &text)));
        params
    }
}

/// The signing key in a claim's answer (its fifth column): 32 hex digits,
/// else the answer is refused, never used.
fn answered_key(rows: &[Vec<Option<String>>]) -> Result<[u8; 16], CallError> {
    let text = rows
        .first()
        .and_then(|r| r.get(4).cloned().flatten())
        .unwrap_or_default();
    let mut key = [0u8; 16];
    let parsed = is_signing_key(&text)
        && key.iter_mut().enumerate().all(|(i, b)| {
            text.get(2 * i..2 * i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .map(|v| *b = v)
                .is_some()
        });
    if parsed {
        Ok(key)
    } else {
        Err(unrightful(
            format!("a claim answered the signing key {text:?}"),
            None,
        ))
    }
}
