//! The bit layout of an ID and its encoding and decoding.
//!
//! ```text
//!  63 | 62 ........... | ........ | ........ 0
//!   0 |  time          | node     | sequence
//! ```
//!
//! The sign bit is always 0, so an ID is a positive `bigint`. The time field
//! takes what the node and sequence fields leave and must keep at least
//! [`MIN_TIME_BITS`] bits (35 bits of milliseconds last about a year; the
//! default 41 bits last 69 years).
//!
//! Inside the generator the node id is a constant, so the state is only the
//! *pair* `(time, sequence)` packed as `time << sequence_bits | sequence`.
//! Packing it that way makes "the next pair" simply `pair + 1`: when the
//! sequence of a millisecond is used up, the carry moves into the time field,
//! which is exactly "borrow the next millisecond".

use thiserror::Error;

/// Bits an ID has for its payload (the sign bit stays 0).
pub const PAYLOAD_BITS: u32 = 63;
/// The time field must keep at least this many bits.
pub const MIN_TIME_BITS: u32 = 35;
/// The largest width the node field may have.
pub const MAX_NODE_BITS: u32 = PAYLOAD_BITS - MIN_TIME_BITS - MIN_SEQUENCE_BITS;
/// The sequence field needs at least one bit to count within a millisecond.
pub const MIN_SEQUENCE_BITS: u32 = 1;
/// The largest width the sequence field may have.
pub const MAX_SEQUENCE_BITS: u32 = PAYLOAD_BITS - MIN_TIME_BITS;

/// Why a layout cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LayoutError {
    #[error(
        "snowflake_id.node_bits = {0} is out of range: the valid range is 0 .. {MAX_NODE_BITS}"
    )]
    NodeBits(i64),
    #[error(
        "snowflake_id.sequence_bits = {0} is out of range: the valid range is {MIN_SEQUENCE_BITS} .. {MAX_SEQUENCE_BITS}"
    )]
    SequenceBits(i64),
    #[error(
        "snowflake_id.node_bits = {node_bits} and snowflake_id.sequence_bits = {sequence_bits} leave {time_bits} bits for the time, fewer than {MIN_TIME_BITS}: node_bits + sequence_bits must be at most {max_sum}",
        time_bits = PAYLOAD_BITS as i64 - node_bits - sequence_bits,
        max_sum = PAYLOAD_BITS - MIN_TIME_BITS
    )]
    TooFewTimeBits { node_bits: i64, sequence_bits: i64 },
}

/// Why an ID or a time cannot be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CodecError {
    #[error("{0} is not a snowflake ID: IDs are never negative")]
    NegativeId(i64),
    #[error("time {time_ms} ms after the epoch does not fit the {time_bits}-bit time field (at most {max} ms)")]
    TimeOutOfRange {
        time_ms: u64,
        time_bits: u32,
        max: u64,
    },
    #[error("node id {node} does not fit the {node_bits}-bit node field (at most {max})")]
    NodeOutOfRange { node: u64, node_bits: u32, max: u64 },
    #[error(
        "sequence {sequence} does not fit the {sequence_bits}-bit sequence field (at most {max})"
    )]
    SequenceOutOfRange {
        sequence: u64,
        sequence_bits: u32,
        max: u64,
    },
}

/// The three parts of an ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdParts {
    /// Milliseconds since the configured epoch.
    pub time_ms: u64,
    pub node: u64,
    pub sequence: u64,
}

/// Widths of the node and sequence fields; the time field has the rest.
/// The masks and shifts derived from them are computed once, here: the
/// generator uses them on every call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdLayout {
    node_bits: u32,
    sequence_bits: u32,
    time_shift: u32,
    max_sequence: u64,
    max_time_ms: u64,
    max_pair: u64,
}

impl Default for IdLayout {
    /// 41 bits of time, 10 of node, 12 of sequence: Twitter's split.
    fn default() -> Self {
        IdLayout::with_bits(10, 12)
    }
}

/// The largest value of a field of `bits` bits (no field has 64: the
/// payload has 63). Branch-free: the generator computes masks per call.
const fn mask(bits: u32) -> u64 {
    debug_assert!(bits < 64);
    (1u64 << bits) - 1
}

impl IdLayout {
    /// Checks the widths as they come from the settings.
    pub fn new(node_bits: i64, sequence_bits: i64) -> Result<Self, LayoutError> {
        if !(0..=MAX_NODE_BITS as i64).contains(&node_bits) {
            return Err(LayoutError::NodeBits(node_bits));
        }
        if !(MIN_SEQUENCE_BITS as i64..=MAX_SEQUENCE_BITS as i64).contains(&sequence_bits) {
            return Err(LayoutError::SequenceBits(sequence_bits));
        }
        if node_bits + sequence_bits > (PAYLOAD_BITS - MIN_TIME_BITS) as i64 {
            return Err(LayoutError::TooFewTimeBits {
                node_bits,
                sequence_bits,
            });
        }
        Ok(IdLayout::with_bits(node_bits as u32, sequence_bits as u32))
    }

    /// The layout of widths already checked.
    const fn with_bits(node_bits: u32, sequence_bits: u32) -> Self {
        let time_bits = PAYLOAD_BITS - node_bits - sequence_bits;
        IdLayout {
            node_bits,
            sequence_bits,
            time_shift: node_bits + sequence_bits,
            max_sequence: mask(sequence_bits),
            max_time_ms: mask(time_bits),
            max_pair: (mask(time_bits) << sequence_bits) | mask(sequence_bits),
        }
    }

    pub const fn node_bits(&self) -> u32 {
        self.node_bits
    }
    pub const fn sequence_bits(&self) -> u32 {
        self.sequence_bits
    }
    pub const fn time_bits(&self) -> u32 {
        PAYLOAD_BITS - self.node_bits - self.sequence_bits
    }
    /// How far the time field is shifted left in an ID.
    pub const fn time_shift(&self) -> u32 {
        self.time_shift
    }
    pub const fn max_node(&self) -> u64 {
        mask(self.node_bits)
    }
    pub const fn max_sequence(&self) -> u64 {
        self.max_sequence
    }
    /// The last millisecond the time field can hold.
    pub const fn max_time_ms(&self) -> u64 {
        self.max_time_ms
    }
    /// IDs one node can issue per millisecond.
    pub const fn ids_per_ms(&self) -> u64 {
        1 << self.sequence_bits
    }

    /// Builds an ID from its parts, checking each against its field.
    pub fn encode(&self, parts: IdParts) -> Result<i64, CodecError> {
        if parts.time_ms > self.max_time_ms() {
            return Err(CodecError::TimeOutOfRange {
                time_ms: parts.time_ms,
                time_bits: self.time_bits(),
                max: self.max_time_ms(),
            });
        }
        if parts.node > self.max_node() {
            return Err(CodecError::NodeOutOfRange {
                node: parts.node,
                node_bits: self.node_bits,
                max: self.max_node(),
            });
        }
        if parts.sequence > self.max_sequence() {
            return Err(CodecError::SequenceOutOfRange {
                sequence: parts.sequence,
                sequence_bits: self.sequence_bits,
                max: self.max_sequence(),
            });
        }
        Ok(((parts.time_ms << self.time_shift())
            | (parts.node << self.sequence_bits)
            | parts.sequence) as i64)
    }

    /// Splits an ID into its parts. Every non-negative `bigint` decodes.
    pub fn decode(&self, id: i64) -> Result<IdParts, CodecError> {
        if id < 0 {
            return Err(CodecError::NegativeId(id));
        }
        let id = id as u64;
        Ok(IdParts {
            time_ms: id >> self.time_shift(),
            node: (id >> self.sequence_bits) & self.max_node(),
            sequence: id & self.max_sequence(),
        })
    }

    /// The smallest ID any node can issue in millisecond `time_ms`: the lower
    /// bound for range scans and partition bounds.
    pub fn smallest_id_at(&self, time_ms: u64) -> Result<i64, CodecError> {
        self.encode(IdParts {
            time_ms,
            node: 0,
            sequence: 0,
        })
    }

    /// The largest ID node `node` can issue up to and including `time_ms`.
    pub fn largest_id_until(&self, time_ms: u64, node: u64) -> Result<i64, CodecError> {
        self.encode(IdParts {
            time_ms,
            node,
            sequence: self.max_sequence(),
        })
    }

    /// How many ID values `span_ms` milliseconds cover: the width of an ID
    /// range (an ID-based partition) that holds exactly that much time.
    /// Ranges of this width starting at a multiple of it begin at a
    /// millisecond boundary `span_ms` apart from the epoch. `None` when the
    /// span is longer than the time field.
    pub fn ids_in_span(&self, span_ms: u64) -> Option<i64> {
        if span_ms > self.max_time_ms() + 1 {
            return None;
        }
        // At most 2^time_bits << time_shift = 2^63: one past i64::MAX only
        // for the whole time field.
        i64::try_from(span_ms << self.time_shift()).ok()
    }

    /// Packs `(time, sequence)` into the generator's state word.
    pub const fn pair(&self, time_ms: u64, sequence: u64) -> u64 {
        (time_ms << self.sequence_bits) | sequence
    }
    pub const fn pair_time(&self, pair: u64) -> u64 {
        pair >> self.sequence_bits
    }
    pub const fn pair_sequence(&self, pair: u64) -> u64 {
        pair & self.max_sequence()
    }

    /// The ID of state word `pair` on node `node`. The caller guarantees the
    /// pair's time fits the layout (the generator checks before issuing) and
    /// that `node` fits the node field (checked at server start). Pairs keep
    /// their order: a larger pair gives a larger ID.
    pub const fn id_of_pair(&self, pair: u64, node: u64) -> i64 {
        (((pair >> self.sequence_bits) << self.time_shift())
            | (node << self.sequence_bits)
            | (pair & self.max_sequence())) as i64
    }

    /// The largest pair whose time still fits the time field.
    pub const fn max_pair(&self) -> u64 {
        self.max_pair
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn id_span_of_a_day_is_a_day_of_ids() {
        let l = IdLayout::default();
        let day = l.ids_in_span(86_400_000).unwrap();
        assert_eq!(day, 86_400_000 << 22);
        // The first ID of day n after the epoch is n * day, and the span
        // holds every node and sequence of every millisecond of the day.
        let day3 = l.smallest_id_at(3 * 86_400_000).unwrap();
        assert_eq!(day3, 3 * day);
        assert_eq!(
            l.largest_id_until(4 * 86_400_000 - 1, 1023),
            Ok(4 * day - 1)
        );
        assert_eq!(IdLayout::new(0, 1).unwrap().ids_in_span(1000), Some(2000));
    }

    #[test]
    fn id_span_longer_than_the_time_field_is_refused() {
        let l = IdLayout::default();
        assert_eq!(
            l.ids_in_span(l.max_time_ms()),
            Some((l.max_time_ms() as i64) << 22)
        );
        // The whole time field is 2^63 ID values: one more than i64 holds.
        assert_eq!(l.ids_in_span(l.max_time_ms() + 1), None);
        assert_eq!(l.ids_in_span(u64::MAX), None);
        assert_eq!(l.ids_in_span(0), Some(0));
    }

    #[test]
    fn default_is_41_10_12() {
        let l = IdLayout::default();
        assert_eq!(
            (l.time_bits(), l.node_bits(), l.sequence_bits()),
            (41, 10, 12)
        );
        assert_eq!(l.max_node(), 1023);
        assert_eq!(l.max_sequence(), 4095);
        assert_eq!(l.ids_per_ms(), 4096);
        assert_eq!(IdLayout::new(10, 12), Ok(l));
    }

    #[test]
    fn widths_are_validated() {
        assert_eq!(IdLayout::new(-1, 12), Err(LayoutError::NodeBits(-1)));
        assert_eq!(IdLayout::new(28, 12), Err(LayoutError::NodeBits(28)));
        assert_eq!(IdLayout::new(10, 0), Err(LayoutError::SequenceBits(0)));
        assert_eq!(IdLayout::new(0, 29), Err(LayoutError::SequenceBits(29)));
        assert_eq!(
            IdLayout::new(20, 12),
            Err(LayoutError::TooFewTimeBits {
                node_bits: 20,
                sequence_bits: 12
            })
        );
        let msg = IdLayout::new(20, 12).unwrap_err().to_string();
        assert!(msg.contains("31 bits for the time"), "{msg}");
        assert!(msg.contains("at most 28"), "{msg}");
        assert!(IdLayout::new(0, 28).is_ok());
        assert!(IdLayout::new(27, 1).is_ok());
        assert!(IdLayout::new(16, 12).is_ok());
    }

    #[test]
    fn extremes_round_trip() {
        let l = IdLayout::default();
        let max = IdParts {
            time_ms: l.max_time_ms(),
            node: 1023,
            sequence: 4095,
        };
        assert_eq!(l.encode(max), Ok(i64::MAX));
        assert_eq!(l.decode(i64::MAX), Ok(max));
        let zero = IdParts {
            time_ms: 0,
            node: 0,
            sequence: 0,
        };
        assert_eq!(l.encode(zero), Ok(0));
        assert_eq!(l.decode(0), Ok(zero));
        assert_eq!(l.decode(-1), Err(CodecError::NegativeId(-1)));
        assert_eq!(l.decode(i64::MIN), Err(CodecError::NegativeId(i64::MIN)));
    }

    #[test]
    fn encode_rejects_fields_that_do_not_fit() {
        let l = IdLayout::default();
        assert!(matches!(
            l.encode(IdParts {
                time_ms: 1 << 41,
                node: 0,
                sequence: 0
            }),
            Err(CodecError::TimeOutOfRange { .. })
        ));
        assert!(matches!(
            l.encode(IdParts {
                time_ms: 0,
                node: 1024,
                sequence: 0
            }),
            Err(CodecError::NodeOutOfRange { .. })
        ));
        assert!(matches!(
            l.encode(IdParts {
                time_ms: 0,
                node: 0,
                sequence: 4096
            }),
            Err(CodecError::SequenceOutOfRange { .. })
        ));
    }

    #[test]
    fn pair_increment_borrows_the_next_millisecond() {
        let l = IdLayout::default();
        let p = l.pair(77, 4095);
        assert_eq!(l.pair_time(p + 1), 78);
        assert_eq!(l.pair_sequence(p + 1), 0);
        assert!(l.id_of_pair(p + 1, 5) > l.id_of_pair(p, 5));
    }

    fn any_layout() -> impl Strategy<Value = IdLayout> {
        (0i64..=MAX_NODE_BITS as i64, 1i64..=MAX_SEQUENCE_BITS as i64)
            .prop_filter("time bits", |(n, s)| n + s <= 28)
            .prop_map(|(n, s)| IdLayout::new(n, s).expect("filtered to valid widths"))
    }

    fn layout_and_parts() -> impl Strategy<Value = (IdLayout, IdParts)> {
        any_layout().prop_flat_map(|l| {
            (
                Just(l),
                0..=l.max_time_ms(),
                0..=l.max_node(),
                0..=l.max_sequence(),
            )
                .prop_map(|(l, time_ms, node, sequence)| {
                    (
                        l,
                        IdParts {
                            time_ms,
                            node,
                            sequence,
                        },
                    )
                })
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        #[test]
        fn round_trip_over_every_field((l, parts) in layout_and_parts()) {
            let id = l.encode(parts).unwrap();
            prop_assert!(id >= 0);
            prop_assert_eq!(l.decode(id).unwrap(), parts);
            prop_assert_eq!(l.id_of_pair(l.pair(parts.time_ms, parts.sequence), parts.node), id);
        }

        #[test]
        fn every_non_negative_id_round_trips(l in any_layout(), id in 0i64..=i64::MAX) {
            let parts = l.decode(id).unwrap();
            prop_assert_eq!(l.encode(parts).unwrap(), id);
        }

        #[test]
        fn ids_sort_like_pairs((l, a) in layout_and_parts(), b_time in any::<u64>(), b_seq in any::<u64>()) {
            let b = IdParts { time_ms: b_time % (l.max_time_ms() + 1), node: a.node, sequence: b_seq & l.max_sequence() };
            let (pa, pb) = (l.pair(a.time_ms, a.sequence), l.pair(b.time_ms, b.sequence));
            prop_assert_eq!(pa.cmp(&pb), l.encode(a).unwrap().cmp(&l.encode(b).unwrap()));
        }

        #[test]
        fn smallest_id_at_bounds_every_node((l, parts) in layout_and_parts()) {
            let id = l.encode(parts).unwrap();
            prop_assert!(l.smallest_id_at(parts.time_ms).unwrap() <= id);
            if parts.time_ms < l.max_time_ms() {
                prop_assert!(l.smallest_id_at(parts.time_ms + 1).unwrap() > id);
            }
        }
    }

    /// Why a fleet must never run two layouts at once, even with distinct
    /// node ids and the same time width: node 16 on 10/12 bits and node 4
    /// on 8/14 bits issue the same ID at sequence 0 of the same millisecond
    /// (16 << 12 == 4 << 14), and many more collide.
    #[test]
    fn two_layouts_of_one_time_width_collide_across_nodes() {
        let a = IdLayout::new(10, 12).unwrap();
        let b = IdLayout::new(8, 14).unwrap();
        assert_eq!(a.time_bits(), b.time_bits());
        let at = |layout: &IdLayout, node, sequence| {
            layout
                .encode(IdParts {
                    time_ms: 1_000_000,
                    node,
                    sequence,
                })
                .unwrap()
        };
        assert_eq!(at(&a, 16, 0), at(&b, 4, 0));
        // Every ID of node 4 on 8/14 bits in a millisecond is one that
        // nodes 16 to 19 on 10/12 bits can issue.
        for sequence in (0..1 << 14).step_by(97) {
            let id = at(&b, 4, sequence);
            let parts = a.decode(id).unwrap();
            assert!((16..20).contains(&parts.node), "{parts:?}");
        }
    }
}
