//! Who is claiming: a claim's secret (128 random bits, of which the
//! registry sees the hash, `signing.rs`), the host's name (shown in the
//! registry's claims, for operators), and this data directory's last claim
//! (its node id only a preference for the next claim, never trusted as
//! one; its registry's id checked in `connect.rs`).

use crate::core::instance::read_marker;
use crate::core::node_marker::NodeMarker;
use crate::pg::settings::data_dir;
use pgrx::pg_sys;
use std::ffi::CStr;

/// The data directory's last claimed node id (`fleet node_id`): only a
/// preference for the next claim, never trusted as a claim.
pub const NODE_FILE_NAME: &str = "snowflake_id.node";

/// This data directory's last claim in `fleet` (its node id is only a
/// preference for the next claim).
pub fn last_claim(fleet: &str) -> Option<NodeMarker> {
    let text = read_marker(&data_dir(), NODE_FILE_NAME).ok().flatten()?;
    NodeMarker::parse(&text).filter(|m| m.fleet == fleet)
}

pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is a writable buffer of buf.len() bytes, which bounds
    // what gethostname writes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    // SAFETY: on success `buf` holds a NUL-terminated name. Relies on: the name
    // being shorter than the buffer (Linux caps it at HOST_NAME_MAX, 64 bytes;
    // POSIX leaves a truncated name unterminated). The buffer outlives the
    // read, and the text is copied at once.
    unsafe { CStr::from_ptr(buf.as_ptr().cast()) }
        .to_string_lossy()
        .into_owned()
}

/// A random number in [0, 1), for spreading retries.
pub fn random_unit() -> f64 {
    let bytes = random_secret();
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[..8]);
    (u64::from_le_bytes(word) >> 11) as f64 / (1u64 << 53) as f64
}

/// 128 random bits: a claim's secret.
pub fn random_secret() -> [u8; 16] {
    let mut bytes = [0u8; 16];
    // SAFETY: `bytes` is a writable buffer of exactly bytes.len() bytes, the
    // length pg_strong_random is told to fill.
    let ok = unsafe { pg_sys::pg_strong_random(bytes.as_mut_ptr().cast(), bytes.len()) };
    if !ok {
        // Never expected; still distinct per process and moment.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        bytes.copy_from_slice(&(t ^ (std::process::id() as u128) << 64).to_le_bytes());
    }
    bytes
}
