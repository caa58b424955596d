//! The `snowflake_id.*` settings.
//!
//! Node id, epoch and widths are `postmaster` settings: the generator and the
//! lease are built on them at start, and a session must never be able to
//! issue IDs under another node id (`SET snowflake_id.node_id` is refused by
//! PostgreSQL itself). They are declared with wide ranges and validated
//! together by [`crate::core::config::Config::validate`], see there for why.
//! `max_clock_drift`, `max_clock_offset` and `lease_sync` are reloadable.
//!
//! A mistyped setting must not start a server on defaults: PostgreSQL only
//! warns of a value it cannot parse (`sequence_bits = '14 bits'`), and says
//! nothing of an unknown name (`snowflake_id.sequencebits`); a node on
//! another layout than its fleet issues its neighbours' IDs. So [`define`]
//! notes the `snowflake_id.*` values given before it defines the settings,
//! stops the server on one not taken or not a setting ([`check_given`]),
//! and reserves the prefix. The validated [`Config`], the one copy of the
//! start-up settings, is set once in the postmaster ([`validate_or_stop`])
//! and inherited by every process through fork ([`config`]).

use crate::core::config::{Config, Settings};
use crate::core::generator::DriftPolicy;
use crate::pg::clock;
use crate::pg::errors::{self, Error};
use pgrx::pg_sys;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};
use std::ffi::{CStr, CString};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

pub const DEFAULT_EPOCH: &str = "2025-01-01 00:00:00+00";
pub const DEFAULT_MAX_CLOCK_DRIFT_MS: i32 = 5_000;

static NODE_ID: GucSetting<i32> = GucSetting::<i32>::new(-1);
static EPOCH: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c"2025-01-01 00:00:00+00"));
static NODE_BITS: GucSetting<i32> = GucSetting::<i32>::new(10);
static SEQUENCE_BITS: GucSetting<i32> = GucSetting::<i32>::new(12);
static MAX_CLOCK_DRIFT: GucSetting<i32> = GucSetting::<i32>::new(DEFAULT_MAX_CLOCK_DRIFT_MS);
pub const DEFAULT_MAX_CLOCK_OFFSET_MS: i32 = 1_000;
static MAX_CLOCK_OFFSET: GucSetting<i32> = GucSetting::<i32>::new(DEFAULT_MAX_CLOCK_OFFSET_MS);
static LEASE_SYNC: GucSetting<bool> = GucSetting::<bool>::new(false);
static REGISTRY: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
static REGISTRY_FLEET: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c"default"));
pub const DEFAULT_REGISTRY_GRANT_MS: i32 = 30_000;
static REGISTRY_GRANT: GucSetting<i32> = GucSetting::<i32>::new(DEFAULT_REGISTRY_GRANT_MS);
static REGISTRY_ALLOW_UNVERIFIED: GucSetting<bool> = GucSetting::<bool>::new(false);
static PUBLIC_ID_KEYS: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);

/// The configuration validated at start. Set once in the postmaster and
/// inherited by every backend through fork.
static CONFIG: OnceLock<Config> = OnceLock::new();

/// The prefix of every setting.
const PREFIX: &str = "snowflake_id";
/// The settings' names, for the message about an unknown one.
const NAMES: &str = "node_id, epoch, node_bits, sequence_bits, max_clock_drift, max_clock_offset, lease_sync, registry, registry_fleet, registry_grant, registry_allow_unverified and public_id_keys";

/// Defines the settings, then stops the server on any `snowflake_id.*`
/// value it was given that is not taken, and reserves the prefix.
pub fn define() {
    let given = given_values();
    define_settings();
    check_given(&given);
    // SAFETY: called from `_PG_init` while preloading, in the postmaster
    // (single-threaded, no transaction needed); the prefix is a 'static C
    // string, which PostgreSQL copies.
    unsafe { pg_sys::MarkGUCPrefixReserved(c"snowflake_id".as_ptr()) };
}

/// A `snowflake_id.*` value the server was given before the settings were
/// defined (PostgreSQL keeps it as a placeholder).
struct Given {
    name: String,
    value: String,
    /// Where it was given, for the message: `file line n`, or empty.
    place: String,
}

/// Every variable PostgreSQL knows, defined or placeholder.
fn variables() -> Vec<*mut pg_sys::config_generic> {
    // SAFETY: get_guc_variables returns guc.c's array of `n` pointers to the
    // variables' structs (null-checked); it is copied into the Vec at once,
    // since defining a setting may reallocate it. Single-threaded process, no
    // setting defined during the copy.
    unsafe {
        #[cfg(feature = "pg15")]
        let (vars, n) = (pg_sys::get_guc_variables(), pg_sys::GetNumConfigOptions());
        #[cfg(not(feature = "pg15"))]
        let (vars, n) = {
            let mut n = 0;
            (pg_sys::get_guc_variables(&mut n), n)
        };
        if vars.is_null() {
            return Vec::new();
        }
        std::slice::from_raw_parts(vars, n.max(0) as usize).to_vec()
    }
}

fn name_of(var: *mut pg_sys::config_generic) -> String {
    // SAFETY: relies on: callers pass a non-null pointer from `variables()`
    // whose struct is still alive (no setting defined since, which frees
    // placeholders); a variable's name is a NUL-terminated string it owns,
    // copied here at once.
    unsafe { CStr::from_ptr((*var).name) }
        .to_string_lossy()
        .into_owned()
}

/// Byte-wise: a name may hold any high-bit byte, and PostgreSQL compares
/// names ASCII-case-insensitively.
fn is_ours(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes
        .get(..PREFIX.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(PREFIX.as_bytes()))
        && bytes.get(PREFIX.len()) == Some(&b'.')
        && bytes.len() > PREFIX.len() + 1
}

/// Whether the server runs as the new cluster of `pg_upgrade`: binary-upgrade
/// mode, started with `fsync` turned off on the command line (pg_upgrade
/// starts the old cluster in binary-upgrade mode too, but only the new one
/// with `-c fsync=off`, see its `start_postmaster`).
pub fn is_upgrade_target() -> bool {
    // SAFETY: IsBinaryUpgrade and enableFsync are plain bool globals, set
    // from the command line and settings at start; read in this
    // single-threaded process.
    if !unsafe { pg_sys::IsBinaryUpgrade } || unsafe { pg_sys::enableFsync } {
        return false;
    }
    variables().into_iter().any(|var| {
        !var.is_null()
            && name_of(var) == "fsync"
            // SAFETY: `var` is a non-null (checked) pointer just taken from
            // `variables()`, a live struct: nothing defines a setting meanwhile.
            && unsafe { (*var).source } == pg_sys::GucSource::PGC_S_ARGV
    })
}

fn given_values() -> Vec<Given> {
    variables()
        .into_iter()
        .filter(|&var| !var.is_null())
        .filter_map(|var| {
            let name = name_of(var);
            // SAFETY: `var` is a non-null (filtered) pointer just taken from
            // `variables()`; `define` calls this before any setting is defined, so
            // no placeholder has been freed yet.
            let placeholder = unsafe { (*var).flags } as u32 & pg_sys::GUC_CUSTOM_PLACEHOLDER != 0;
            if !placeholder || !is_ours(&name) {
                return None;
            }
            // SAFETY: the name is the live variable's NUL-terminated name; with
            // missing_ok = true GetConfigOption returns null (checked) or a
            // NUL-terminated value, copied at once before anything can change it.
            let value = unsafe {
                let v = pg_sys::GetConfigOption((*var).name, true, false);
                if v.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(v).to_string_lossy().into_owned()
                }
            };
            // SAFETY: `var` is live (see above); `sourcefile` is null (checked) or
            // a NUL-terminated string the variable owns, copied at once.
            let place = unsafe {
                if (*var).sourcefile.is_null() {
                    String::new()
                } else {
                    format!(
                        " (in \"{}\" line {})",
                        CStr::from_ptr((*var).sourcefile).to_string_lossy(),
                        (*var).sourceline
                    )
                }
            };
            Some(Given { name, value, place })
        })
        .collect()
}

/// Stops the server on a given value under the prefix that is no setting,
/// or that the setting did not take (it stayed on its default).
fn check_given(given: &[Given]) {
    if given.is_empty() {
        return;
    }
    let defined = variables();
    for g in given {
        let var = defined.iter().copied().find(|&var| {
            !var.is_null()
                // SAFETY: `var` is non-null (checked) and from a `variables()` taken
                // after the settings were defined, with none defined since.
                && unsafe { (*var).flags } as u32 & pg_sys::GUC_CUSTOM_PLACEHOLDER == 0
                && name_of(var).eq_ignore_ascii_case(&g.name)
        });
        match var {
            None => errors::stop(Error::UnknownSetting {
                name: g.name.clone(),
                place: g.place.clone(),
                names: NAMES,
            }),
            // SAFETY: `var` was found above in that same `variables()` list, non-null
            // and live.
            Some(var) if unsafe { (*var).source } == pg_sys::GucSource::PGC_S_DEFAULT => {
                let name = name_of(var);
                errors::stop(Error::SettingValueNotTaken {
                    expects: expects(&name),
                    name,
                    value: g.value.clone(),
                    place: g.place.clone(),
                })
            }
            Some(_) => {}
        }
    }
}

/// What a setting takes, for the message about a value it did not take
/// (only the integer, duration and boolean settings can refuse one).
fn expects(name: &str) -> &'static str {
    match name.to_ascii_lowercase().as_str() {
        "snowflake_id.node_id" => "an integer from 0 to 2^node_bits - 1 (0 .. 1023 with the default 10 node bits), different on every server",
        "snowflake_id.node_bits" => "an integer from 0 to 27 (node_bits + sequence_bits at most 28)",
        "snowflake_id.sequence_bits" => "an integer from 1 to 28 (node_bits + sequence_bits at most 28)",
        "snowflake_id.max_clock_drift" => "a duration from 0, such as '5s' or '500ms' (milliseconds without a unit)",
        "snowflake_id.max_clock_offset" => "a duration from 0 to 1h, such as '1s' (milliseconds without a unit)",
        "snowflake_id.lease_sync" => "a boolean: on or off",
        "snowflake_id.registry_grant" => "a duration from 1s to 1h, such as '30s' (milliseconds without a unit)",
        _ => "a string",
    }
}

fn define_settings() {
    GucRegistry::define_int_guc(
        c"snowflake_id.node_id",
        c"Node id stamped into every ID this server issues.",
        c"Required: every server that issues IDs for the same tables needs its own. -1 means unset: snowflake_next() then fails. Range 0 .. 2^node_bits - 1.",
        &NODE_ID,
        i32::MIN,
        i32::MAX,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"snowflake_id.epoch",
        c"Time zero of the ID's time field.",
        c"A timestamp such as '2025-01-01 00:00:00+00' (UTC when no zone is given); must not be in the future.",
        &EPOCH,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"snowflake_id.node_bits",
        c"Width of the node id field of an ID.",
        c"The time field takes 63 - node_bits - sequence_bits bits and needs at least 35.",
        &NODE_BITS,
        i32::MIN,
        i32::MAX,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"snowflake_id.sequence_bits",
        c"Width of the per-millisecond sequence field of an ID.",
        c"2^sequence_bits IDs per millisecond per node before the generator borrows the next millisecond.",
        &SEQUENCE_BITS,
        i32::MIN,
        i32::MAX,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"snowflake_id.max_clock_drift",
        c"How far the time in issued IDs may run ahead of the wall clock.",
        c"Bursts borrow future milliseconds up to this limit, then wait for the clock; a clock that stepped back further makes snowflake_next() fail.",
        &MAX_CLOCK_DRIFT,
        0,
        i32::MAX,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"snowflake_id.max_clock_offset",
        c"The largest difference between this server's clock and that of a server it takes over from.",
        c"A successor (a promoted standby, the end of a point-in-time recovery, an accepted copy or upgrade) starts its IDs this much further ahead of its clock than its predecessor's drift limit, so that none is below an ID the predecessor handed out in its last moments.",
        &MAX_CLOCK_OFFSET,
        0,
        3_600_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_bool_guc(
        c"snowflake_id.lease_sync",
        c"Whether a lease extension waits for the synchronous standbys to flush its WAL record.",
        c"On: no ID is handed out before the synchronous standbys (synchronous_standby_names) know its lease, so a promoted synchronous standby never reissues an ID, even one whose row was never stored. Off: the lease record travels with the WAL like the rows.",
        &LEASE_SYNC,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"snowflake_id.registry",
        c"Connection string of the node-id registry (empty: no registry).",
        c"A libpq connection string or URI (TLS, .pgpass and service files as libpq supports them). Set: the node id is claimed from the registry at start and its grant bounds the IDs issued; snowflake_id.node_id, if set, must be granted as it is.",
        &REGISTRY,
        GucContext::Postmaster,
        GucFlags::SUPERUSER_ONLY,
    );
    GucRegistry::define_string_guc(
        c"snowflake_id.registry_fleet",
        c"The ID space in the registry this server belongs to.",
        c"Servers of one fleet share an epoch and a layout and get distinct node ids.",
        &REGISTRY_FLEET,
        GucContext::Postmaster,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"snowflake_id.registry_grant",
        c"How far ahead, in ID time, the registry grants the node id.",
        c"Issuing goes on this long without the registry; a crashed server with a fixed node id waits up to this long at restart; a node id passes on this long after its holder died.",
        &REGISTRY_GRANT,
        1_000,
        3_600_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_bool_guc(
        c"snowflake_id.registry_allow_unverified",
        c"Whether the registry may be reached over a connection that is not verified.",
        c"Off: only a Unix-domain socket or TLS with sslmode=verify-full is used, since anyone else on the address or the network path could grant a node id another server holds. On: any connection is used, with a WARNING.",
        &REGISTRY_ALLOW_UNVERIFIED,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"snowflake_id.public_id_keys",
        c"The file of the keys of public IDs (empty: none).",
        c"A path, absolute or relative to the data directory, of a file readable by the server's user alone: lines of a key version and 64 hex digits. Never a key itself.",
        &PUBLIC_ID_KEYS,
        GucContext::Sighup,
        GucFlags::SUPERUSER_ONLY,
    );
}

/// Reads the settings, validates them together and remembers the result;
/// a bad configuration stops the server (an ERROR while the postmaster loads
/// preloaded libraries is fatal), with the setting and range in the log.
pub fn validate_or_stop() {
    let settings = Settings {
        node_id: NODE_ID.get(),
        epoch: text_of(&EPOCH).unwrap_or_else(|| DEFAULT_EPOCH.to_string()),
        node_bits: NODE_BITS.get(),
        sequence_bits: SEQUENCE_BITS.get(),
    };
    // Every member of pg_read_all_settings reads snowflake_id.registry
    // (no setting flag hides it from them): it must hold no secret.
    if let Some(key) = crate::core::conninfo::secret_in(&registry_conninfo()) {
        errors::stop(Error::RegistrySecretInSetting { key });
    }
    match Config::validate(&settings, clock::unix_now_ms()) {
        Ok(config) => {
            if let Some(ended) = config.time_field_ended(&settings.epoch, clock::unix_now_ms()) {
                errors::warn(Error::Settings(ended));
            }
            let _ = CONFIG.set(config);
            REGISTRY_ENABLED.store(!registry_conninfo().trim().is_empty(), Ordering::Relaxed);
        }
        Err(e) => errors::stop(Error::Settings(e)),
    }
}

/// Whether this server takes its node id from a registry
/// (`snowflake_id.registry` set): fixed at start and inherited by every
/// process, so the hot path reads a plain static.
static REGISTRY_ENABLED: AtomicBool = AtomicBool::new(false);

/// Whether the node id comes from the registry ([`REGISTRY_ENABLED`]).
#[inline]
pub fn registry_enabled() -> bool {
    REGISTRY_ENABLED.load(Ordering::Relaxed)
}

/// The configuration, or `None` when the library was not preloaded.
#[inline]
pub fn config() -> Option<&'static Config> {
    CONFIG.get()
}

/// Read on every call of `snowflake_next()`: straight from the setting's
/// storage, without `GucSetting::get`'s thread check (backends are single
/// threaded, and PostgreSQL only changes the value between statements).
#[inline]
pub fn max_clock_drift_ms() -> u64 {
    // SAFETY: the pointer is to a static that PostgreSQL updates in place,
    // in this same single-threaded process (when it applies a setting), so
    // the read races with nothing; any i32 is a valid value.
    unsafe { *MAX_CLOCK_DRIFT.as_ptr() }.max(0) as u64
}

/// `snowflake_id.max_clock_offset`, as this process last read it.
pub fn max_clock_offset_ms() -> u64 {
    MAX_CLOCK_OFFSET.get().max(0) as u64
}

/// `snowflake_id.lease_sync`, as this process last read it.
pub fn lease_sync() -> bool {
    // SAFETY: the pointer is to a static that PostgreSQL updates in place,
    // in this same single-threaded process (when it applies a setting), so
    // the read races with nothing; PostgreSQL stores only true or false.
    unsafe { *LEASE_SYNC.as_ptr() }
}

/// `snowflake_id.registry`: the registry's connection string ("" when off).
pub fn registry_conninfo() -> String {
    text_of(&REGISTRY).unwrap_or_default()
}

/// `snowflake_id.public_id_keys`: the key file of public IDs ("" when none).
pub fn public_id_keys() -> String {
    text_of(&PUBLIC_ID_KEYS).unwrap_or_default()
}

/// A text setting's value, as this process last read it.
fn text_of(setting: &GucSetting<Option<CString>>) -> Option<String> {
    setting.get().map(|c| c.to_string_lossy().into_owned())
}

/// The registry's connection string as messages show it (no password).
pub fn registry_display() -> String {
    crate::core::conninfo::display(&registry_conninfo())
}

/// `snowflake_id.registry_fleet`.
pub fn registry_fleet() -> String {
    text_of(&REGISTRY_FLEET).unwrap_or_else(|| "default".into())
}

/// `snowflake_id.registry_grant`, as this process last read it.
pub fn registry_grant_ms() -> u64 {
    REGISTRY_GRANT.get().max(1_000) as u64
}

/// `snowflake_id.registry_allow_unverified`, as this process last read it.
pub fn registry_allow_unverified() -> bool {
    REGISTRY_ALLOW_UNVERIFIED.get()
}

/// The generator's drift rule as the settings give it now.
#[inline]
pub fn drift_policy() -> DriftPolicy {
    DriftPolicy {
        max_drift_ms: max_clock_drift_ms(),
    }
}

/// The data directory (`data_directory`): where the lease and the other
/// files of the extension live.
pub fn data_dir() -> PathBuf {
    // SAFETY: DataDir is a process-local global, null (checked) or the data
    // directory's NUL-terminated path, set at process start and never freed
    // while the process runs; it is copied at once.
    unsafe {
        if pg_sys::DataDir.is_null() {
            PathBuf::from(".")
        } else {
            PathBuf::from(
                CStr::from_ptr(pg_sys::DataDir)
                    .to_string_lossy()
                    .into_owned(),
            )
        }
    }
}
