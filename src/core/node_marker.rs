//! The data directory's record of its last claim (`snowflake_id.node`):
//! the fleet, the node id, and the id of the registry it was claimed from
//! (`fleet node_id registry_id`; files written before hold no registry id).
//! The node id is only a preference for the next claim, never trusted as
//! one. The registry's id only ever stops a claim: one is not made at
//! another registry under the same address, which knows none of the floors
//! this server's claims rested on.

/// What the record says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeMarker {
    pub fleet: String,
    pub node_id: u64,
    pub registry_id: Option<[u8; 16]>,
}

impl NodeMarker {
    /// The record's text (one line).
    pub fn text(&self) -> String {
        match &self.registry_id {
            Some(id) => format!("{} {} {}", self.fleet, self.node_id, uuid_text(id)),
            None => format!("{} {}", self.fleet, self.node_id),
        }
    }

    /// The record read back; None if it is not one (a fleet name may hold
    /// spaces: the node id and registry id are the last fields).
    pub fn parse(text: &str) -> Option<NodeMarker> {
        let text = text.trim_end();
        let (rest, registry_id) = match text.rsplit_once(' ') {
            Some((rest, last)) => match uuid_bytes(last) {
                Some(id) => (rest, Some(id)),
                None => (text, None),
            },
            None => (text, None),
        };
        let (fleet, node) = rest.rsplit_once(' ')?;
        Some(NodeMarker {
            fleet: fleet.to_string(),
            node_id: node.parse().ok()?,
            registry_id,
        })
    }
}

/// A UUID's 16 bytes from its text (8-4-4-4-12 hex digits).
pub fn uuid_bytes(text: &str) -> Option<[u8; 16]> {
    let dashes = [8, 13, 18, 23];
    if text.len() != 36
        || dashes.iter().any(|&i| text.as_bytes()[i] != b'-')
        || !text.bytes().all(|b| b == b'-' || b.is_ascii_hexdigit())
    {
        return None;
    }
    let digits: String = text.chars().filter(|c| *c != '-').collect();
    let mut bytes = [0u8; 16];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = u8::from_str_radix(digits.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(bytes)
}

/// A UUID's text (lower case) from its 16 bytes.
pub fn uuid_text(bytes: &[u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ID: &str = "6e0341e7-ebde-49a0-bb4a-bcdeb21a43f5";

    #[test]
    fn records_old_and_new() {
        assert_eq!(
            NodeMarker::parse("default 3"),
            Some(NodeMarker {
                fleet: "default".into(),
                node_id: 3,
                registry_id: None
            })
        );
        let m = NodeMarker::parse(&format!("my fleet 12 {ID}\n")).unwrap();
        assert_eq!(m.fleet, "my fleet");
        assert_eq!(m.node_id, 12);
        assert_eq!(m.registry_id.map(|id| uuid_text(&id)), Some(ID.to_string()));
        assert_eq!(m.text(), format!("my fleet 12 {ID}"));
        assert_eq!(NodeMarker::parse("default"), None);
        assert_eq!(NodeMarker::parse(&format!("default x {ID}")), None);
        assert_eq!(NodeMarker::parse(""), None);
    }

    #[test]
    fn uuids() {
        assert_eq!(uuid_bytes(ID).map(|b| uuid_text(&b)), Some(ID.into()));
        assert_eq!(
            uuid_bytes("6E0341E7-EBDE-49A0-BB4A-BCDEB21A43F5").map(|b| uuid_text(&b)),
            Some(ID.into())
        );
        assert_eq!(uuid_bytes("6e0341e7ebde49a0bb4abcdeb21a43f5"), None);
        assert_eq!(uuid_bytes("6e0341e7-ebde-49a0-bb4a-bcdeb21a43fg"), None);
        assert_eq!(uuid_bytes("6e0341e7-ebde-49a0-bb4a-bcdeb21a43f"), None);
    }

    proptest! {
        #[test]
        fn a_record_reads_back(fleet in "[a-z ]{0,6}[a-z]", node in 0u64..1 << 28, id in proptest::option::of(any::<[u8; 16]>())) {
            let m = NodeMarker { fleet, node_id: node, registry_id: id };
            prop_assert_eq!(NodeMarker::parse(&m.text()), Some(m));
        }
    }
}
