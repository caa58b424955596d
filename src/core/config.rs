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
                "Choose a later snowflake_id.epoch or fewer node and sequence bits, so that the time field covers the present.".into()
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
        let elapsed = (now_unix_ms - epoch_unix_ms) as u64;
        if elapsed > layout.max_time_ms() {
            return Err(ConfigError::EpochTooOld {
                text: settings.epoch.clone(),
                time_bits: layout.time_bits(),
                ended_ms_ago: elapsed - layout.max_time_ms(),
            });
        }
        Ok(Config {
            layout,
            node_id,
            epoch_unix_ms,
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
        let mut s35 = s.clone();
        s35.node_bits = 16;
        assert!(matches!(
            Config::validate(&s35, NOW),
            Err(ConfigError::EpochTooOld { time_bits: 35, .. })
        ));
        // 41 bits from 1970 last until 2039.
        assert!(Config::validate(&s, NOW).is_ok());
        s.epoch = "not a date".into();
        assert!(matches!(
            Config::validate(&s, NOW),
            Err(ConfigError::Epoch(_))
        ));
    }
}
