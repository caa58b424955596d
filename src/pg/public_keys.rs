//! The keys of public IDs as this backend knows them.
//!
//! The key ring lives in a file that `snowflake_id.public_id_keys` names
//! (absolute, or relative to the data directory), never in a setting: a
//! setting's value is readable by every member of `pg_read_all_settings`
//! (and `pg_monitor`), and a key passed as a function argument would land in
//! `pg_stat_statements`, the server log and `pg_stat_activity`. The file is
//! the registry password's precedent (`.pgpass`): readable by the server's
//! operating system user alone, so among database roles only those that
//! may read the server's files (superusers, `pg_read_server_files`) can
//! see it. A file that others may read is refused, as PostgreSQL refuses
//! such an SSL key.
//!
//! Each backend reads the file at its first public-ID call and keeps the
//! ring and one expanded cipher per version it used. It reads the file
//! again when the setting names another file (a reload), or when a call
//! names a version the ring does not hold (a key added since), so rotation
//! needs no restart. A version's key never changes (the IDs stored under
//! it would change meaning), so a kept key is never stale; a removed
//! version stays usable in sessions that already used it until they end.

use crate::core::public_id::{check_key_file_mode, KeyRing, PublicIdCipher};
use crate::pg::errors::{raise, Error};
use crate::pg::settings;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// The ring read from `path`, and the ciphers made from it so far.
struct Known {
    path: String,
    ring: KeyRing,
    ciphers: BTreeMap<u8, PublicIdCipher>,
}

thread_local! {
    // A backend is one thread; this is its cache.
    static KNOWN: RefCell<Option<Known>> = const { RefCell::new(None) };
}

/// The key file's path as the setting gives it, resolved against the data
/// directory when relative.
fn resolve(setting: &str) -> PathBuf {
    let path = PathBuf::from(setting);
    if path.is_absolute() {
        path
    } else {
        settings::data_dir().join(path)
    }
}

/// Reads and checks the key file the setting names.
fn read_ring(setting: &str) -> Result<KeyRing, Error> {
    if setting.is_empty() {
        return Err(Error::PublicKeysUnset);
    }
    let path = resolve(setting);
    let shown = path.display().to_string();
    let unreadable = |e: std::io::Error| Error::PublicKeysUnreadable {
        path: shown.clone(),
        message: e.to_string(),
    };
    let metadata = std::fs::metadata(&path).map_err(unreadable)?;
    check_key_file_mode(metadata.permissions().mode()).map_err(|error| Error::PublicKeyFile {
        path: shown.clone(),
        error,
    })?;
    let text = std::fs::read_to_string(&path).map_err(unreadable)?;
    KeyRing::parse(&text).map_err(|error| Error::PublicKeyFile {
        path: shown.clone(),
        error,
    })
}

/// Runs `f` with the cipher of key `version`, reading the key file first
/// when this backend has not, when the setting names another file, or when
/// the version is not in the ring it read. Raises the error otherwise.
pub fn with_cipher<R>(version: u8, f: impl FnOnce(&PublicIdCipher) -> R) -> R {
    let setting = settings::public_id_keys();
    KNOWN.with(|cell| {
        let mut known = cell.borrow_mut();
        let fresh = match known.as_ref() {
            Some(k) => k.path != setting || k.ring.key(version).is_none(),
            None => true,
        };
        if fresh {
            let ring = read_ring(&setting).unwrap_or_else(|e| raise(e));
            *known = Some(Known {
                path: setting.clone(),
                ring,
                ciphers: BTreeMap::new(),
            });
        }
        let Some(k) = known.as_mut() else {
            unreachable!("the cache was just filled")
        };
        let Some(key) = k.ring.key(version) else {
            let versions = k.ring.versions();
            drop(known);
            raise(Error::UnknownKeyVersion {
                version,
                path: resolve(&setting).display().to_string(),
                versions,
            })
        };
        let cipher = k
            .ciphers
            .entry(version)
            .or_insert_with(|| PublicIdCipher::new(key));
        f(cipher)
    })
}

/// Every version of the key file with its cipher, the file read afresh:
/// `snowflake_public_keys()` computes each version's check value with it.
pub fn ring_ciphers() -> Vec<(u8, PublicIdCipher)> {
    let setting = settings::public_id_keys();
    let ring = read_ring(&setting).unwrap_or_else(|e| raise(e));
    ring.versions()
        .into_iter()
        .filter_map(|v| ring.key(v).map(|key| (v, PublicIdCipher::new(key))))
        .collect()
}
