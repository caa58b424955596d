//! Validation of the settings as a whole, at server start.
//!
//! Each `snowflake_id.*` setting is declared to PostgreSQL with a wide range,
//! because a value outside a custom variable's declared range is only warned
//! about and replaced by the default, and a silent default node id is exactly
//! the mistake that gives two nodes the same IDs. The real checks are here,
//! where the widths, the node id and the epoch can be checked against each
//! other, and a failure stops the server with a message that names the
//! setting and its valid range.

use super::epoch::{parse_epoch, EpochError};
use super::layout::{IdLayout, LayoutError};
use thiserror::Error;

/// The settings as PostgreSQL holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub node_id: i32,
    pub epoch: String,
    pub node_bits: i32,
    pub sequence_bits: i32,
}

/// The validated configuration of the generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub layout: IdLayout,
    /// `None` while `snowflake_id.node_id` is unset: decoding works, issuing
    /// fails with a hint.
    pub node_id: Option<u64>,
    pub epoch_unix_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error(transparent)]
    Epoch(#[from] EpochError),
    #[error("snowflake_id.node_id = {node_id} is out of range: the valid range is 0 .. {max} with snowflake_id.node_bits = {node_bits} (or -1 for unset)")]
    NodeId {
        node_id: i64,
        max: u64,
        node_bits: u32,
    },
    #[error("snowflake_id.epoch = '{text}' is in the future: the epoch must not be later than the current time")]
    EpochInFuture { text: String },
    #[error("snowflake_id.epoch = '{text}' is too far in the past: the {time_bits}-bit time field ended {ended_ms_ago} ms ago")]
    EpochTooOld {
        text: String,
        time_bits: u32,
        ended_ms_ago: u64,
    },
}

/// The way out once a time field has ended (runbook, "The end of the time
/// field"): no layout can form IDs above the old ones, so new IDs must lie
/// beside them, under a node id of their own, and on a new database system:
/// a server's lease and its standbys' replay order configurations by their
/// IDs as numbers, and remember only the last one, so in place a change
/// back to a node id of the old epoch, or a standby replaying the change,
/// would issue the old IDs again.
pub const TIME_FIELD_ENDED_HINT: &str = "No configuration of this server can issue IDs above this node's any more, and none can be accepted in place. Move the databases to a new server (initdb, pg_dump or logical replication) with a later snowflake_id.epoch, the same node_bits and sequence_bits and a snowflake_id.node_id no server ever issued under with the old epoch (docs/runbook.md, \"The end of the time field\").";

impl ConfigError {
    /// The hint PostgreSQL prints under the error.
    pub fn hint(&self) -> String {
        match self {
            ConfigError::Layout(_) => format!(
                "Set snowflake_id.node_bits and snowflake_id.sequence_bits in postgresql.conf so that together they are at most {}; the defaults are 10 and 12.",
                super::layout::PAYLOAD_BITS - super::layout::MIN_TIME_BITS
            ),
            ConfigError::Epoch(_) | ConfigError::EpochInFuture { .. } => {
                "Set snowflake_id.epoch in postgresql.conf to a past time such as '2025-01-01 00:00:00+00'.".into()
            }
            ConfigError::NodeId { .. } => {
                "Give every node a distinct snowflake_id.node_id within the range, or widen snowflake_id.node_bits.".into()
            }
            ConfigError::EpochTooOld { .. } => {
                TIME_FIELD_ENDED_HINT.into()
            }
        }
    }
}

impl Config {
    /// Checks the settings against each other and against the current time.
    pub fn validate(settings: &Settings, now_unix_ms: i64) -> Result<Config, ConfigError> {
        let layout = IdLayout::new(settings.node_bits.into(), settings.sequence_bits.into())?;
        let node_id = match settings.node_id {
            -1 => None,
            n if n >= 0 && (n as u64) <= layout.max_node() => Some(n as u64),
            n => {
                return Err(ConfigError::NodeId {
                    node_id: n.into(),
                    max: layout.max_node(),
                    node_bits: layout.node_bits(),
                })
            }
        };
        let epoch_unix_ms = parse_epoch(&settings.epoch)?;
        if epoch_unix_ms > now_unix_ms {
            return Err(ConfigError::EpochInFuture {
                text: settings.epoch.clone(),
            });
        }
        // A time field that has ended is no reason to stop the server (every
        // database in it would be down): the generator refuses each call
        // instead (SQLSTATE 54000), and the start-up warns
        // (Config::time_field_ended).
        Ok(Config {
            layout,
            node_id,
            epoch_unix_ms,
        })
    }

    /// Why no ID can be issued under this configuration at `now_unix_ms`:
    /// its time field has ended. `epoch_text` is the setting as written.
    pub fn time_field_ended(&self, epoch_text: &str, now_unix_ms: i64) -> Option<ConfigError> {
        let elapsed = now_unix_ms.saturating_sub(self.epoch_unix_ms).max(0) as u64;
        (elapsed > self.layout.max_time_ms()).then(|| ConfigError::EpochTooOld {
            text: epoch_text.to_string(),
            time_bits: self.layout.time_bits(),
            ended_ms_ago: elapsed - self.layout.max_time_ms(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_790_000_000_000; // 2026-09
    fn settings(node_id: i32, node_bits: i32, sequence_bits: i32) -> Settings {
        Settings {
            node_id,
            epoch: "2025-01-01 00:00:00+00".into(),
            node_bits,
            sequence_bits,
        }
    }

    #[test]
    fn defaults_with_a_node_id() {
        let c = Config::validate(&settings(7, 10, 12), NOW).unwrap();
        assert_eq!(c.node_id, Some(7));
        assert_eq!(c.layout, IdLayout::default());
        assert_eq!(c.epoch_unix_ms, 1_735_689_600_000);
    }

    #[test]
    fn unset_node_id_is_allowed_at_start() {
        assert_eq!(
            Config::validate(&settings(-1, 10, 12), NOW)
                .unwrap()
                .node_id,
            None
        );
    }

    #[test]
    fn node_id_is_checked_against_the_node_bits() {
        let e = Config::validate(&settings(1024, 10, 12), NOW).unwrap_err();
        assert_eq!(
            e,
            ConfigError::NodeId {
                node_id: 1024,
                max: 1023,
                node_bits: 10
            }
        );
        let msg = e.to_string();
        assert!(
            msg.contains("snowflake_id.node_id = 1024") && msg.contains("0 .. 1023"),
            "{msg}"
        );
        assert!(Config::validate(&settings(-2, 10, 12), NOW).is_err());
        assert!(Config::validate(&settings(255, 8, 12), NOW).is_ok());
        assert!(Config::validate(&settings(256, 8, 12), NOW).is_err());
        assert!(Config::validate(&settings(0, 0, 12), NOW).is_ok());
        assert!(Config::validate(&settings(1, 0, 12), NOW).is_err());
    }

    #[test]
    fn inconsistent_widths_are_refused() {
        let e = Config::validate(&settings(1, 20, 12), NOW).unwrap_err();
        assert!(matches!(
            e,
            ConfigError::Layout(LayoutError::TooFewTimeBits { .. })
        ));
        assert!(e.hint().contains("at most 28"));
    }

    #[test]
    fn epoch_must_be_past_and_cover_now() {
        let mut s = settings(1, 10, 12);
        s.epoch = "2030-01-01".into();
        assert!(matches!(
            Config::validate(&s, NOW),
            Err(ConfigError::EpochInFuture { .. })
        ));
        s.epoch = "1970-01-01".into();
        // 35 time bits last ~398 days: an epoch in 1970 cannot cover 2026.
        // The server starts (the generator refuses each call), and says why.
        let mut s35 = s.clone();
        s35.node_bits = 16;
        let c35 = Config::validate(&s35, NOW).unwrap();
        assert!(matches!(
            c35.time_field_ended("1970-01-01", NOW),
            Some(ConfigError::EpochTooOld { time_bits: 35, .. })
        ));
        assert!(c35
            .time_field_ended("1970-01-01", (1i64 << 35) - 1)
            .is_none());
        // 41 bits from 1970 last until 2039.
        assert!(Config::validate(&s, NOW).is_ok());
        s.epoch = "not a date".into();
        assert!(matches!(
            Config::validate(&s, NOW),
            Err(ConfigError::Epoch(_))
        ));
    }
}
