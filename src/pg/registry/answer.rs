//! What the registry worker asks of the registry, which answers it
//! accepts, and how a failed call reads: the bounds of a claim or renewal
//! ([`Asked`], from the configuration and the generator's time), the
//! claim's answer parsed and checked by the pure rules of
//! [`crate::core::registry`] (an answer no registry function can give is
//! refused, SQLSTATE 08P01, never used), and a failure's text, whole and
//! as every user may see it.

use super::libpq::CallError;
use crate::core::config::Config;
use crate::core::registry::{check_claim_answer, AnswerError, Asked, Grant};
use crate::pg::clock;
use crate::pg::settings;
use crate::pg::state::Shared;

/// What a claim or renewal asks for now: the bounds its answer must keep.
pub fn asked_of(config: &Config, shared: &Shared) -> Asked {
    Asked {
        node_id: config.node_id,
        holder_now_ms: holder_time_ms(config, shared),
        grant_ms: settings::registry_grant_ms(),
        max_node: config.layout.max_node(),
        max_time_ms: config.layout.max_time_ms(),
    }
}

/// The claim's answer (node id, claim, floor, grant), checked: one that no
/// registry function gives is refused, never used.
pub fn parse_grant(rows: &[Vec<Option<String>>], asked: &Asked) -> Result<Grant, CallError> {
    let field = |i: usize| -> Option<i64> { rows.first()?.get(i).cloned().flatten()?.parse().ok() };
    let (Some(node_id), Some(claim_id), Some(floor_ms), Some(until_ms), 1) =
        (field(0), field(1), field(2), field(3), rows.len())
    else {
        return Err(unrightful(format!("a claim answered {rows:?}"), None));
    };
    check_claim_answer(asked, node_id, claim_id, floor_ms, until_ms).map_err(|e| {
        unrightful(
            format!("a claim answered node id {node_id}, claim {claim_id}, IDs after {floor_ms} ms up to {until_ms} ms"),
            Some(e),
        )
    })
}

/// An answer that cannot have come from the registry's functions: refused
/// with SQLSTATE 08P01 (protocol violation), which is what backends then
/// report, and never used.
pub fn unrightful(what: String, why: Option<AnswerError>) -> CallError {
    CallError::Refused {
        sqlstate: "08P01".into(),
        message: match why {
            Some(why) => format!("the registry's answer cannot be right: {why}"),
            None => "the registry's answer cannot be right: not one row of numbers".into(),
        },
        detail: Some(what),
        hint: Some(
            "Check that snowflake_id.registry reaches the registry's own database (dbname) with registry/snowflake_registry.sql installed there unchanged, through a verified connection (sslmode=verify-full); the answer was not used."
                .into(),
        ),
    }
}

/// The holder's present in ID time: the clock, or the generator's last
/// ID if that is later.
pub fn holder_time_ms(config: &Config, shared: &Shared) -> u64 {
    (clock::now_ms(config).max(0) as u64).max(shared.generator.last_time_ms(&config.layout))
}

/// A failed call as the claim's message keeps it ("SQLSTATE text": the
/// registry's words with its detail and hint, or libpq's), and what of it
/// every user may see: that the call failed, and its SQLSTATE; not where
/// the registry is, nor the hosts and data directories its words may name.
pub fn failure_texts(e: &CallError) -> (String, String) {
    match e {
        CallError::Unreachable(m) => (
            format!("08001 could not reach the registry: {m}"),
            "08001 could not reach the registry".to_string(),
        ),
        CallError::Refused {
            sqlstate,
            message,
            detail,
            hint,
        } => {
            let mut text = format!("{sqlstate} {message}");
            if let Some(d) = detail {
                text.push_str(&format!(" ({d})"));
            }
            if let Some(h) = hint {
                text.push_str(&format!(" {h}"));
            }
            (text, format!("{sqlstate} the registry refused the call"))
        }
    }
}

/// A claim refused because the registry has no `claim_keyed()` (42883:
/// its script is of an older release) says so, and how to fix it.
pub fn older_script(e: CallError) -> CallError {
    match e {
        CallError::Refused { sqlstate, .. } if sqlstate == "42883" => CallError::Refused {
            sqlstate,
            message: "the registry's script is older than this server: it has no keyed claims and signed calls (snowflake_registry.claim_keyed(), registry_identity())".into(),
            detail: None,
            hint: Some("Run registry/snowflake_registry.sql of this release on the registry (running it again keeps every claim and floor); this server then claims by itself.".into()),
        },
        e => e,
    }
}

/// Whether a renewal's refusal says the registry's fence ended this
/// server's own claim (the registry's words after the claim's name: a
/// host or data directory named later in a takeover's message cannot pass
/// for it).
pub fn fence_ended(e: &CallError) -> bool {
    matches!(e, CallError::Refused { message, .. }
    if message.split_once("\" is lost: ").is_some_and(|(_, why)| {
        why.starts_with("the registry ended every claim at ")
    }))
}

/// Why a node id claimed again after a fence cannot be used, if it
/// cannot: its floor lies below the end of the grant this server held
/// (`held_until_ms`), within which every ID it issued lies, so the fence
/// did not cover that grant (a stale or short fence). The server then
/// stays stopped, as it would without claiming again, for the operator.
pub fn uncovered_reclaim(config: &Config, grant: &Grant, held_until_ms: u64) -> Option<String> {
    (grant.floor_ms < held_until_ms as i64).then(|| {
        format!(
            "snowflake_id: node id {} claimed again with IDs after {}, below the end of the grant this server held ({}): the registry's fence does not cover it, so the claim is not used; fence the registry (SELECT * FROM snowflake_registry.fence_after_restore()) and restart this server",
            grant.node_id,
            clock::timestamp_of(config, grant.floor_ms.max(0) as u64),
            clock::timestamp_of(config, held_until_ms)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(message: &str) -> CallError {
        CallError::Refused {
            sqlstate: "55000".into(),
            message: message.into(),
            detail: None,
            hint: None,
        }
    }

    #[test]
    fn only_the_fence_of_the_own_claim_reads_as_fenced() {
        assert!(fence_ended(&refused(
            "the claim on node id 3 of fleet \"default\" is lost: the registry ended every claim at 2026-11-26 19:00:00+00: a new timeline"
        )));
        // A takeover, its holder's data directory spelling the words.
        assert!(!fence_ended(&refused(
            "the claim on node id 3 of fleet \"default\" is lost: it was taken over by h:5432 /srv/the registry ended every claim at x"
        )));
        assert!(!fence_ended(&refused(
            "the claim on node id 3 of fleet \"default\" is lost: the registry does not know it"
        )));
        assert!(!fence_ended(&CallError::Unreachable(
            "is lost: the registry ended every claim at ".into()
        )));
    }
}
