//! How errors reach the user: always through `ereport`, with a SQLSTATE, a
//! message that says what is wrong and a hint that says how to fix it.
//!
//! [`Error`] lists everything the extension reports, and [`Error::report`]
//! is the one table that maps each case to its SQLSTATE, message, detail and
//! hint. The pure core's error types (generator, codec, text forms, column
//! conversion, settings) keep their own message (their `Display`) and, where
//! they have one, their hint; they enter the table as one variant each, so
//! the SQLSTATE a core error gets is decided here and nowhere else. A SQL
//! function raises `errors::raise(Error::...)` and never spells a SQLSTATE.
//!
//! Every message starts with the extension's name, so that it is clear in
//! the server log which component is speaking. The texts are a public
//! interface: the pg_regress expected files and the integration tests read
//! them.

use crate::core::config::ConfigError;
use crate::core::convert::{self, ConvertError};
use crate::core::epoch::EpochError;
use crate::core::generator::{GenerateError, MAX_BATCH};
use crate::core::layout::{CodecError, LayoutError};
use crate::core::public_id::{KeyFileError, PublicIdError, PublicIdErrorKind};
use crate::core::text_forms::{self, TextFormError};
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use pgrx::PgSqlErrorCode as Code;

/// Why a server refuses to issue until an operator acts: every label of
/// `snowflake_stats().issuing_held`, spelt here only. The labels are a
/// contract with the monitoring rules (the `reason` label of
/// `monitoring/queries.yaml`, the table in `docs/monitoring.md`); the
/// message beside each is the text of the [`Error`] `snowflake_next()`
/// raises for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// The lease was written under another epoch, layout or node id.
    ConfigurationChanged,
    LeaseCorrupt,
    LeaseUnreadable,
    /// A lease record in the WAL could not be replayed or kept.
    ReplayFailed,
    /// The data directory is a copy of another server's.
    Copied,
    /// `pg_upgrade` made this cluster and the lease file was not copied.
    LeaseMissingAfterUpgrade,
    /// No `snowflake_id.node_id` and no registry.
    NodeIdUnset,
    /// No node id claimed from the registry (yet).
    RegistryNoNodeId,
    /// The registry gave the node id to another server.
    RegistryLost,
}

impl Held {
    #[cfg(test)]
    pub const ALL: [Held; 9] = [
        Held::ConfigurationChanged,
        Held::LeaseCorrupt,
        Held::LeaseUnreadable,
        Held::ReplayFailed,
        Held::Copied,
        Held::LeaseMissingAfterUpgrade,
        Held::NodeIdUnset,
        Held::RegistryNoNodeId,
        Held::RegistryLost,
    ];

    /// The label in `snowflake_stats().issuing_held`.
    pub fn label(self) -> &'static str {
        match self {
            Held::ConfigurationChanged => "configuration_changed",
            Held::LeaseCorrupt => "lease_corrupt",
            Held::LeaseUnreadable => "lease_unreadable",
            Held::ReplayFailed => "replay_failed",
            Held::Copied => "copied",
            Held::LeaseMissingAfterUpgrade => "lease_missing_after_upgrade",
            Held::NodeIdUnset => "node_id_unset",
            Held::RegistryNoNodeId => "registry_no_node_id",
            Held::RegistryLost => "registry_lost",
        }
    }
}

/// Everything the extension reports to the user: errors, the settings error
/// that stops the server, and the clock-step warning.
#[derive(Debug)]
pub enum Error {
    // --- the server is not ready to issue IDs
    /// The library was loaded on demand, not through shared_preload_libraries.
    NotPreloaded,
    /// `snowflake_id.node_id` is -1; `max_node` is the largest valid id.
    NodeIdUnset { max_node: u64 },
    /// The lease was written under another configuration; `changes` lists
    /// the differences.
    ConfigurationChanged { changes: String },
    /// The lease file is corrupt (the message says how); `seeming_lease`
    /// is the time its lease line reads, as text, if it can be read.
    LeaseCorrupt {
        message: String,
        seeming_lease: Option<String>,
    },
    /// The lease file cannot be read (the message says why).
    LeaseUnreadable(String),
    /// A standby cannot issue IDs.
    InRecovery,
    /// A lease record in the WAL could not be replayed or kept (the
    /// message says why).
    ReplayFailed(String),
    /// The data directory is a copy of another server's (the message says
    /// how it was recognised).
    Copied(String),
    /// `pg_upgrade` made this cluster and the lease file was not copied.
    LeaseMissingAfterUpgrade(String),
    /// Registry mode: no node id claimed, because the registry cannot be
    /// reached (or has not been asked yet).
    RegistryUnavailable { registry: String, message: String },
    /// Registry mode: the registry refused the claim (with its SQLSTATE:
    /// the node id is held, the layout differs from the fleet's, the pool
    /// is full).
    RegistryRefused {
        registry: String,
        sqlstate: String,
        message: String,
    },
    /// Registry mode: claimed, waiting for the clock to come near the floor.
    RegistryWaitingForFloor { message: String },
    /// Registry mode (a WARNING): the registry connection is not verified.
    RegistryUnverified { registry: String },
    /// Registry mode: the node id was claimed again (with a floor above
    /// the grant that ended) while this call held IDs taken before; they
    /// lie in no grant of this server and are not issued.
    RegistryClaimedAgain { floor: String },
    /// Registry mode: the grant ended without a renewal.
    RegistryGrantEnded {
        registry: String,
        until: String,
        lost: bool,
        message: String,
    },

    // --- issuing
    /// The generator refused (time field exhausted, lease not writable,
    /// batch too large).
    Generate(GenerateError),
    /// The clock is further behind the last issued ID than the drift
    /// limit; `last_issued` is that ID's time, as text.
    ClockBehind {
        error: GenerateError,
        last_issued: String,
    },
    /// `snowflake_next_batch(n)` with `n < 1`; `max` is the largest batch.
    BatchSizeNotPositive { n: i32, max: u64 },
    /// A batch larger than `max`, which is [`MAX_BATCH`] or what fits in the
    /// drift limit (`max_drift_ms + 1` milliseconds of `ids_per_ms` IDs).
    BatchSizeTooLarge {
        n: i32,
        max: u64,
        max_drift_ms: u64,
        ids_per_ms: u64,
    },

    // --- decoding and timestamps
    /// An ID that cannot be decoded (a negative one).
    Decode(CodecError),
    /// A time in an ID beyond what `timestamp with time zone` can hold.
    TimeBeyondTimestamp { time_ms: u64 },
    /// `snowflake_from_timestamp('infinity')`.
    InfiniteTimestamp,
    // --- the read horizon
    /// `snowflake_horizon()` on a standby.
    HorizonInRecovery,
    /// A backend without a slot (never expected: the slots cover every
    /// backend).
    HorizonNoSlot,
    /// No room for a prepared transaction's bound (never expected: the
    /// table has `max_prepared_transactions` entries).
    HorizonPreparedFull { capacity: usize },
    /// The prepared transactions' bounds could not be written.
    HorizonPreparedUnwritable(String),
    /// A prepared transaction whose bound this server does not know.
    HorizonUnknownPrepared { xid: u32, gid: String },

    /// A layout passed to a decoder as arguments that no server can run.
    LayoutArgument(LayoutError),
    /// An infinite epoch passed to a decoder.
    InfiniteEpoch,
    /// An epoch passed to a decoder as text that is not a timestamp in the
    /// form of `snowflake_id.epoch`.
    EpochArgument(EpochError),
    /// `snowflake_id_span` of an interval with months (no fixed length).
    SpanWithMonths { span: String },
    /// `snowflake_id_span` of an interval that is not a positive whole
    /// number of milliseconds.
    SpanNotPositiveMs { span: String },
    /// `snowflake_id_span` of an interval longer than the time field.
    SpanTooLong { span: String, time_bits: u32 },
    /// A timestamp before the epoch; `epoch` and `end` are the range IDs
    /// can express, as text.
    BeforeEpoch {
        ts: String,
        epoch: String,
        end: String,
    },
    /// A timestamp past the end of the time field.
    PastTimeField {
        ts: String,
        time_bits: u32,
        epoch: String,
        end: String,
    },

    // --- text forms
    /// An unknown format name, an ID out of range, or text that is no ID.
    TextForm(TextFormError),

    // --- public IDs
    /// A negative ID or public ID, a key version out of range, text that is
    /// no public ID.
    PublicId(PublicIdError),
    /// `snowflake_id.public_id_keys` is empty.
    PublicKeysUnset,
    /// The key file cannot be read (the message says why).
    PublicKeysUnreadable { path: String, message: String },
    /// The key file is refused: its permissions or its contents.
    PublicKeyFile { path: String, error: KeyFileError },
    /// The key file has no key of this version.
    UnknownKeyVersion {
        version: u8,
        path: String,
        versions: Vec<u8>,
    },

    // --- accepting a configuration change
    /// `snowflake_accept_configuration()` by a non-superuser.
    NotSuperuser,
    /// Acceptance on a server in recovery.
    AcceptInRecovery,
    /// The lease cannot be read, so there is nothing to accept.
    AcceptLeaseUnusable(String),
    /// The new layout cannot issue IDs greater than the old ones.
    AcceptUnorderable(String),
    /// The first ID greater than the old configuration's largest lies
    /// `ahead_ms` ahead of the clock, at `first` (as text).
    AcceptTooFarAhead {
        old_max_id: i64,
        first: String,
        ahead_ms: i64,
    },
    /// The new lease cannot be written.
    AcceptWrite(String),

    // --- converting a column
    /// The planner refused the conversion.
    Convert(ConvertError),
    /// A NULL argument (the function is STRICT; just in case).
    ConvertNullArgument,
    /// A conversion in a transaction whose snapshot predates its lock
    /// (REPEATABLE READ or SERIALIZABLE).
    ConvertNeedsReadCommitted,
    /// An SPI query on the catalog failed.
    CatalogReadFailed(String),
    /// The table was dropped between the call and the catalog read.
    RelationGone { oid: u32 },
    /// No such column in the table.
    NoSuchColumn { column: String, table: String },
    /// The extension is loaded but not created in this database.
    ExtensionNotInstalled,

    // --- not errors
    /// A bad combination of settings: stops the server at start (FATAL).
    Settings(ConfigError),
    /// `snowflake_id.registry` holds a password (`key`): stops the server.
    RegistrySecretInSetting { key: &'static str },
    /// A `snowflake_id.*` name that is no setting: stops the server.
    UnknownSetting {
        name: String,
        place: String,
        names: &'static str,
    },
    /// A value a setting did not take (PostgreSQL kept the default): stops
    /// the server.
    SettingValueNotTaken {
        name: String,
        value: String,
        place: String,
        /// What the setting takes: its type and range.
        expects: &'static str,
    },
    /// The clock stepped back within the drift limit (a WARNING).
    ClockSteppedBack { step_ms: u64, max_drift_ms: u64 },
}

/// An [`Error`] as PostgreSQL reports it.
pub struct Report {
    pub code: Code,
    pub message: String,
    pub detail: Option<String>,
    pub hint: String,
}

fn report(code: Code, message: impl Into<String>, hint: impl Into<String>) -> Report {
    Report {
        code,
        message: message.into(),
        detail: None,
        hint: hint.into(),
    }
}

fn report_with_detail(
    code: Code,
    message: impl Into<String>,
    detail: impl Into<String>,
    hint: impl Into<String>,
) -> Report {
    Report {
        detail: Some(detail.into()),
        ..report(code, message, hint)
    }
}

impl Error {
    /// The message, and the detail after a colon: the error as one line of
    /// text, for a status column.
    pub fn text(self) -> String {
        let report = self.report();
        match report.detail {
            Some(detail) => format!("{}: {detail}", report.message),
            None => report.message,
        }
    }

    /// The table: SQLSTATE, message, detail and hint of every case.
    pub fn report(self) -> Report {
        use Error as E;
        match self {
            E::NotPreloaded => report(
                Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "the library is not loaded through shared_preload_libraries",
                "Add snowflake_id to the list in shared_preload_libraries in postgresql.conf, keeping the libraries already there (SHOW shared_preload_libraries; for example 'pg_stat_statements,snowflake_id'), give the server a node id (snowflake_id.node_id, or snowflake_id.registry to claim one from a registry), and restart the server.",
            ),
            E::NodeIdUnset { max_node } => report(
                Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "snowflake_id.node_id is not set",
                format!(
                    "Add snowflake_id.node_id = <n> to postgresql.conf, with n between 0 and {max_node} and different on every server, then restart the server; or let it claim a free node id from a registry (snowflake_id.registry, docs/registry.md)."
                ),
            ),
            E::ConfigurationChanged { changes } => report_with_detail(
                Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "the configuration changed since this server last issued IDs",
                changes,
                "IDs issued under the old and the new configuration could collide or sort wrongly. Restore the old settings, or, if the change is intended, run SELECT snowflake_accept_configuration(); as a superuser.",
            ),
            E::LeaseCorrupt {
                message,
                seeming_lease,
            } => report(
                Code::ERRCODE_DATA_CORRUPTED,
                message,
                match seeming_lease {
                    Some(time) => format!("Restore the file from a backup. Its damaged content reads that IDs were issued up to {time}: remove the file (then restart) only when the system clock is past that time by more than snowflake_id.max_clock_drift, or IDs may repeat."),
                    None => "Restore the file from a backup. Remove the file (then restart) only when the system clock is past every ID this server issued by more than snowflake_id.max_clock_drift (snowflake_timestamp() of the largest stored ID tells), or IDs may repeat.".to_string(),
                },
            ),
            E::LeaseUnreadable(message) => report(
                Code::ERRCODE_IO_ERROR,
                message,
                "Make the file readable by the server's operating system user, then restart the server.",
            ),
            E::InRecovery => report(
                Code::ERRCODE_READ_ONLY_SQL_TRANSACTION,
                "cannot issue IDs on a server in recovery (a standby)",
                "Issue IDs on the primary: an INSERT reached a standby, so route writes to the primary (target_session_attrs=read-write in the connection string picks it). Decoding works on a standby; after promotion it issues IDs above every lease the old primary wrote to the WAL (docs/operations.md).",
            ),
            E::Copied(message) => report(
                Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("this server may be a copy of another server with the same node id: {message}"),
                "Give this server its own snowflake_id.node_id and restart it; or make sure the server it was copied from no longer issues IDs under this node id. Then run SELECT snowflake_accept_configuration(); as a superuser.",
            ),
            E::LeaseMissingAfterUpgrade(message) => report(
                Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                message,
                "Stop this server and copy snowflake_id.lease from the old data directory into this one (the old server stopped too), then start it: the old lease is adopted and its settings checked. If the old cluster had no such file, it never issued IDs: run SELECT snowflake_accept_configuration(); as a superuser.",
            ),
            E::RegistryUnavailable { registry, message } => report(
                Code::ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
                format!("no node id: the registry ({registry}) has not granted one: {message}"),
                "Make the registry reachable with snowflake_id.registry's connection string (host, port, role with snowflake_registry_client, password in .pgpass); the registry worker keeps trying and issuing starts by itself. The server log has each failure.",
            ),
            E::RegistryRefused {
                registry,
                sqlstate,
                message,
            } => report(
                match sqlstate.as_str() {
                    "53400" => Code::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
                    "22023" => Code::ERRCODE_INVALID_PARAMETER_VALUE,
                    "42501" | "42883" | "3F000" => Code::ERRCODE_INSUFFICIENT_PRIVILEGE,
                    "42704" => Code::ERRCODE_UNDEFINED_OBJECT,
                    "08P01" => Code::ERRCODE_PROTOCOL_VIOLATION,
                    _ => Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                },
                format!("no node id: the registry ({registry}) refused the claim ({sqlstate}): {message}"),
                match sqlstate.as_str() {
                    "42501" | "42883" | "3F000" => "Install the registry (registry/snowflake_registry.sql) in the database the connection string names, and GRANT snowflake_registry_client to the role this server logs in as.",
                    "42704" => "Check snowflake_id.registry_fleet for a typo; a new fleet is made by the registry's owner with snowflake_registry.create_fleet(). The registry worker tries again every few seconds.",
                    "08P01" => "The answer was not used. Check that snowflake_id.registry names the registry's own database, with registry/snowflake_registry.sql installed there unchanged, and verify the connection (sslmode=verify-full).",
                    _ => "Fix what the registry says (its hint is part of the message); the registry worker tries again every few seconds and issuing starts by itself.",
                },
            ),
            E::RegistryWaitingForFloor { message } => report(
                Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                message,
                "This server took over its node id from a holder that did not release it (a crash, a copy, a pause): it issues only after every ID that holder may issue. Wait, or leave snowflake_id.node_id unset so that a free node id is taken at once; a clean shutdown releases the node id and avoids the wait.",
            ),
            E::RegistryUnverified { registry } => report(
                Code::ERRCODE_CONNECTION_EXCEPTION,
                format!("the connection to the registry ({registry}) is not verified: anyone on its network path could answer in the registry's name"),
                "Connect with sslmode=verify-full, with sslrootcert naming the authority that signed the registry's certificate, or through a Unix-domain socket (docs/registry-design.md, \"What the servers trust\"). snowflake_stats().registry_connection shows the connection's trust.",
            ),
            E::RegistryClaimedAgain { floor } => report(
                Code::ERRCODE_T_R_SERIALIZATION_FAILURE,
                format!("the node id was claimed again from the registry while this call held IDs taken under the grant that had ended; they lie below the new claim's floor ({floor}), where another server may have issued, and were not issued"),
                "Retry the statement: IDs are issued above the new floor from now on.",
            ),
            E::RegistryGrantEnded {
                registry,
                until,
                lost,
                message,
            } => report(
                if lost {
                    Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
                } else {
                    Code::ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION
                },
                if lost {
                    format!("the node id's grant ended at {until} and the registry ({registry}) ended this server's claim: {message}")
                } else {
                    format!("the node id's grant ended at {until} and the registry ({registry}) has not renewed it: {message}")
                },
                if lost {
                    "The registry worker claims the same node id again by itself: after a fence of the registry (the message says it ended every claim) issuing resumes once the clock is near the fence; after a takeover, once the other server no longer holds it (it issued no ID the new holder can issue). To take another node id instead, leave snowflake_id.node_id unset and restart this server."
                } else {
                    "Make the registry reachable again: issuing resumes by itself once the registry worker renews the grant. snowflake_id.registry_grant sets how long a server issues without the registry."
                },
            ),
            E::ReplayFailed(message) => report(
                Code::ERRCODE_DATA_CORRUPTED,
                message,
                "IDs the old primary issued may be unknown to this server (the server log has the WARNING from recovery). Repair what failed (the data directory must be writable; every server replaying this WAL must preload a snowflake_id release that reads the primary's lease records: upgrade standbys before their primary, docs/upgrading.md) and restart this server: it is then held (snowflake_id.hold) until a superuser runs SELECT snowflake_accept_configuration(), which starts new IDs above everything the old primary can have issued (its recorded snowflake_id.max_clock_drift, or this server's if larger, plus snowflake_id.max_clock_offset, ahead of the clock).",
            ),

            // Raised without the generator at hand: no time to name.
            E::Generate(error @ GenerateError::ClockBehind { .. }) => E::ClockBehind {
                error,
                last_issued: "unknown".into(),
            }
            .report(),
            E::ClockBehind { error, last_issued } => report_with_detail(
                Code::ERRCODE_SYSTEM_ERROR,
                error.to_string(),
                format!("The last ID this server issued has the time {last_issued}. The system clock stepped back, or the server restarted after a lease that lies ahead of the clock: issuing now could not keep IDs unique and ordered without waiting for the clock to catch up."),
                format!("Correct the system clock, or wait until it passes {last_issued}, or raise snowflake_id.max_clock_drift (ALTER SYSTEM SET snowflake_id.max_clock_drift = '1h'; SELECT pg_reload_conf();). Never delete the lease file (snowflake_id.lease) to clear this error: it is what keeps new IDs after the old ones."),
            ),
            E::Generate(e @ GenerateError::TimeExhausted { .. }) => report(
                Code::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                e.to_string(),
                crate::core::config::TIME_FIELD_ENDED_HINT,
            ),
            // Fewer IDs still fit: the field is not used up yet.
            E::Generate(e @ GenerateError::TooMany { .. }) => report(
                Code::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                e.to_string(),
                "Ask for fewer IDs: the time field is near its end. Once it is used up, see docs/runbook.md, \"The end of the time field\".",
            ),
            E::Generate(e @ GenerateError::BatchTooLarge { .. }) => report(
                Code::ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                e.to_string(),
                "Use smaller batches, or raise snowflake_id.max_clock_drift.",
            ),
            // Raised without the configuration at hand (never expected:
            // backend::issue reports it with the time).
            E::Generate(GenerateError::Grant(e)) => report(
                Code::ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
                e.to_string(),
                "Make the registry reachable again: issuing resumes by itself once the registry worker renews the grant.",
            ),
            E::Generate(GenerateError::Lease(message)) => {
                let hint = if message.contains("lease worker") {
                    "With snowflake_id.lease_sync = on only the lease worker (\"snowflake_id lease\") extends the lease: give it a slot (max_worker_processes, counting the other background workers), see why it stopped in the server log, or turn lease_sync off (ALTER SYSTEM SET snowflake_id.lease_sync = off; SELECT pg_reload_conf();)."
                } else {
                    "The lease file in the data directory must be writable: check free space and permissions."
                };
                report(Code::ERRCODE_IO_ERROR, message, hint)
            }
            E::BatchSizeNotPositive { n, max } => report(
                Code::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("the batch size must be positive, not {n}"),
                format!("Ask for 1 to {max} IDs at a time."),
            ),
            E::BatchSizeTooLarge {
                n,
                max,
                max_drift_ms,
                ids_per_ms,
            } => {
                let (why, hint) = if max == MAX_BATCH {
                    (
                        format!("the largest batch is {MAX_BATCH} IDs"),
                        "Ask for fewer IDs per call and call again for more.".to_string(),
                    )
                } else {
                    (
                        format!(
                            "snowflake_id.max_clock_drift ({max_drift_ms} ms) allows at most {max} IDs in one batch ({} ms of {ids_per_ms} IDs each)",
                            max_drift_ms + 1,
                        ),
                        format!(
                            "Ask for at most {max} IDs per call, or raise snowflake_id.max_clock_drift (each millisecond allows {ids_per_ms} more IDs, up to {MAX_BATCH})."
                        ),
                    )
                };
                report(
                    Code::ERRCODE_INVALID_PARAMETER_VALUE,
                    format!("a batch of {n} IDs is too large: {why}"),
                    hint,
                )
            }

            E::Decode(e) => report(
                Code::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
                e.to_string(),
                "Pass an ID produced by snowflake_next().",
            ),
            E::TimeBeyondTimestamp { time_ms } => report(
                Code::ERRCODE_DATETIME_FIELD_OVERFLOW,
                format!(
                    "{time_ms} ms after the epoch is beyond the range of timestamp with time zone"
                ),
                "Only IDs whose time PostgreSQL can represent can be converted to a timestamp.",
            ),
            E::InfiniteTimestamp => report(
                Code::ERRCODE_DATETIME_FIELD_OVERFLOW,
                "an infinite timestamp has no snowflake ID",
                "Pass a finite timestamp between snowflake_id.epoch and the end of the time field.",
            ),
            E::HorizonInRecovery => report(
                Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "snowflake_horizon() is not available on a standby",
                "Ask the primary: a standby knows neither which transactions are in progress there nor which IDs they issued.",
            ),
            E::HorizonNoSlot => report(
                Code::ERRCODE_INTERNAL_ERROR,
                "this process has no slot for the read horizon",
                "This is a bug in snowflake_id; please report it with the server version and max_connections.",
            ),
            E::HorizonPreparedFull { capacity } => report(
                Code::ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
                format!("no room to keep the read horizon of this prepared transaction ({capacity} entries, all in use)"),
                "Commit or roll back prepared transactions (SELECT * FROM pg_prepared_xacts), or raise max_prepared_transactions and restart.",
            ),
            E::HorizonUnknownPrepared { xid, gid } => report_with_detail(
                Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("the read horizon cannot account for the prepared transaction '{gid}' (xid {xid})"),
                "It was prepared before this server started (before a failover or a restore, or its bound in snowflake_id.prepared was lost), so the IDs it issued are unknown here, and its rows may still commit below any horizon.",
                format!("End it: COMMIT PREPARED '{gid}' or ROLLBACK PREPARED '{gid}' (SELECT * FROM pg_prepared_xacts); then the horizon is available again."),
            ),
            E::HorizonPreparedUnwritable(message) => report(
                Code::ERRCODE_IO_ERROR,
                format!("could not keep the read horizon of this prepared transaction: {message}"),
                "Check the data directory's free space and permissions; the transaction was not prepared.",
            ),
            E::LayoutArgument(e) => report(
                Code::ERRCODE_INVALID_PARAMETER_VALUE,
                // The layout's own texts name the settings; here the
                // widths are arguments.
                e.to_string().replace("snowflake_id.", ""),
                "Pass the layout the IDs were made with (this server's: SELECT epoch, node_bits, sequence_bits FROM snowflake_node_info()).",
            ),
            E::InfiniteEpoch => report(
                Code::ERRCODE_DATETIME_FIELD_OVERFLOW,
                "an infinite epoch cannot place IDs in time",
                "Pass the epoch the IDs were made with (this server's: SELECT epoch FROM snowflake_node_info()).",
            ),
            E::EpochArgument(e) => report(
                Code::ERRCODE_INVALID_DATETIME_FORMAT,
                format!("the epoch '{}' is not a valid timestamp: {}", e.text, e.reason),
                "Write the epoch as snowflake_id.epoch is written, read in UTC unless a zone is given: '2025-01-01 00:00:00+00' (this server's: SELECT epoch FROM snowflake_node_info()). For another form, cast it: '...'::timestamptz, read in the session's TimeZone.",
            ),
            E::SpanWithMonths { span } => report(
                Code::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("the interval {span} has months, which have no fixed length in IDs"),
                "Give the span in days or smaller units (a day is 24 hours here): '30 days' for about a month.",
            ),
            E::SpanNotPositiveMs { span } => report(
                Code::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("the interval {span} is not a positive whole number of milliseconds"),
                "IDs count time in milliseconds: pass a positive interval such as '1 day' or '1 hour'.",
            ),
            E::SpanTooLong { span, time_bits } => report(
                Code::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
                format!("the interval {span} is longer than the {time_bits}-bit time field"),
                "Pass an interval shorter than the time field (SELECT time_bits FROM snowflake_node_info() gives its width).",
            ),
            E::BeforeEpoch { ts, epoch, end } => report(
                Code::ERRCODE_DATETIME_FIELD_OVERFLOW,
                format!("{ts} is before the epoch"),
                format!("IDs can express times from the epoch ({epoch}) to {end}."),
            ),
            E::PastTimeField {
                ts,
                time_bits,
                epoch,
                end,
            } => report(
                Code::ERRCODE_DATETIME_FIELD_OVERFLOW,
                format!("{ts} is past the end of the {time_bits}-bit time field"),
                format!("IDs can express times from the epoch ({epoch}) to {end}."),
            ),

            E::TextForm(e) => {
                let code = match e.kind() {
                    text_forms::ErrorKind::BadFormat => Code::ERRCODE_INVALID_PARAMETER_VALUE,
                    text_forms::ErrorKind::OutOfRange => Code::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
                    text_forms::ErrorKind::BadText => Code::ERRCODE_INVALID_TEXT_REPRESENTATION,
                };
                report(code, e.to_string(), e.hint())
            }

            E::PublicId(e) => {
                let code = match e.kind() {
                    PublicIdErrorKind::OutOfRange => Code::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
                    PublicIdErrorKind::BadVersion => Code::ERRCODE_INVALID_PARAMETER_VALUE,
                    PublicIdErrorKind::BadText => Code::ERRCODE_INVALID_TEXT_REPRESENTATION,
                };
                report(code, e.to_string(), e.hint())
            }
            E::PublicKeysUnset => report(
                Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "no key file for public IDs: snowflake_id.public_id_keys is not set",
                "Write the keys into a file readable by the server's user alone (a line \"1 <64 hex digits>\", from \"openssl rand -hex 32\"), set snowflake_id.public_id_keys to its path and reload.",
            ),
            E::PublicKeysUnreadable { path, message } => report(
                Code::ERRCODE_CONFIG_FILE_ERROR,
                format!("cannot read the key file of public IDs \"{path}\": {message}"),
                "Check snowflake_id.public_id_keys, and that the file exists and the server's operating system user can read it.",
            ),
            E::PublicKeyFile { path, error } => report(
                Code::ERRCODE_CONFIG_FILE_ERROR,
                format!("the key file of public IDs \"{path}\" is refused: {error}"),
                error.hint(),
            ),
            E::UnknownKeyVersion {
                version,
                path,
                versions,
            } => report(
                Code::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("the key file of public IDs \"{path}\" has no key version {version}"),
                format!(
                    "Its versions are {}. A version is added to the file, never changed; keep old versions while public IDs made under them are in use.",
                    versions
                        .iter()
                        .map(u8::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),

            E::NotSuperuser => report(
                Code::ERRCODE_INSUFFICIENT_PRIVILEGE,
                "only a superuser may accept a configuration change",
                "Ask a superuser to run SELECT snowflake_accept_configuration();",
            ),
            E::AcceptInRecovery => report(
                Code::ERRCODE_READ_ONLY_SQL_TRANSACTION,
                "cannot accept a configuration change on a server in recovery (a standby)",
                "Accept it after promotion, on the server that issues IDs: until then, recovery may still replay leases of the old configuration.",
            ),
            E::AcceptLeaseUnusable(message) => report(
                Code::ERRCODE_DATA_CORRUPTED,
                message,
                "A lease that cannot be read cannot be accepted: restore it from a backup, or remove it after making sure the system clock is later than every ID this server issued, and restart.",
            ),
            E::AcceptUnorderable(message) => report(
                Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                message,
                "Keep the old layout: the new one cannot issue IDs greater than the existing ones. Once the old time field has ended, see docs/runbook.md, \"The end of the time field\".",
            ),
            E::AcceptTooFarAhead {
                old_max_id,
                first,
                ahead_ms,
            } => {
                let hint = if ahead_ms < i32::MAX as i64 {
                    format!("Keep the old epoch and time width, or raise snowflake_id.max_clock_drift above {ahead_ms} ms for the acceptance and the time it takes the clock to catch up.")
                } else {
                    "Keep the old epoch and time width: this change cannot keep the IDs ordered.".to_string()
                };
                report_with_detail(
                    Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                    format!(
                        "under the new configuration, IDs greater than {old_max_id} start at {first}, {ahead_ms} ms ahead of the clock"
                    ),
                    "Moving the epoch later, or giving the time field more bits, maps the present onto smaller IDs than those already issued.",
                    hint,
                )
            }
            E::AcceptWrite(message) => report(
                Code::ERRCODE_IO_ERROR,
                message,
                "The data directory must be writable: check free space and permissions.",
            ),

            E::Convert(e) => {
                let code = match e.kind() {
                    convert::ErrorKind::WrongObject => Code::ERRCODE_WRONG_OBJECT_TYPE,
                    convert::ErrorKind::WrongType => Code::ERRCODE_DATATYPE_MISMATCH,
                    convert::ErrorKind::NotSupported => Code::ERRCODE_FEATURE_NOT_SUPPORTED,
                    convert::ErrorKind::State => Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                };
                report(code, format!("cannot convert the column: {e}"), e.hint())
            }
            E::ConvertNeedsReadCommitted => report(
                Code::ERRCODE_INVALID_TRANSACTION_STATE,
                "snowflake_convert_column cannot convert in a REPEATABLE READ or SERIALIZABLE transaction",
                "Its snapshot was taken before the conversion locks the table, so it cannot see the column's largest value. Run the conversion at READ COMMITTED (the default); the dry run works at any level.",
            ),
            E::ConvertNullArgument => report(
                Code::ERRCODE_NULL_VALUE_NOT_ALLOWED,
                "snowflake_convert_column needs a table and a column",
                "Pass the table (as 'schema.table') and the column's name.",
            ),
            E::CatalogReadFailed(e) => report(
                Code::ERRCODE_INTERNAL_ERROR,
                format!("reading the catalog failed: {e}"),
                "This is a bug in snowflake_id; please report it with the table's definition.",
            ),
            E::RelationGone { oid } => report(
                Code::ERRCODE_UNDEFINED_TABLE,
                format!("relation with OID {oid} does not exist"),
                "It was dropped meanwhile; check the table's name.",
            ),
            E::NoSuchColumn { column, table } => report(
                Code::ERRCODE_UNDEFINED_COLUMN,
                format!("column \"{column}\" of relation {table} does not exist"),
                "Pass the column's name as it is stored: case matters (\"Id\" is not id).",
            ),
            E::ExtensionNotInstalled => report(
                Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "the snowflake_id extension is not installed in this database",
                "Run CREATE EXTENSION snowflake_id first.",
            ),

            E::Settings(e) => report(Code::ERRCODE_INVALID_PARAMETER_VALUE, e.to_string(), e.hint()),
            E::RegistrySecretInSetting { key } => report(
                Code::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("snowflake_id.registry holds a {key}: every member of pg_read_all_settings (pg_monitor among them) can read this setting"),
                "Take the secret out of the connection string: put the password in a password file (passfile=/path/to/file, mode 0600, owned by the server's OS user; or that user's ~/.pgpass), in a service file (service=NAME), or use a client certificate (sslcert and sslkey). Then start the server.",
            ),
            E::UnknownSetting { name, place, names } => report(
                Code::ERRCODE_UNDEFINED_OBJECT,
                format!("unknown setting \"{name}\"{place}"),
                format!("snowflake_id's settings are {names}: correct the name or remove the line. The server does not start on a setting it would ignore, since a node on other settings than its fleet can issue its neighbours' IDs."),
            ),
            E::SettingValueNotTaken {
                name,
                value,
                place,
                expects,
            } => report(
                Code::ERRCODE_INVALID_PARAMETER_VALUE,
                format!("invalid value for \"{name}\": \"{value}\"{place}"),
                format!("{name} takes {expects}. The server does not start on the default instead of the value given: correct the value."),
            ),
            E::ClockSteppedBack {
                step_ms,
                max_drift_ms,
            } => report(
                Code::ERRCODE_WARNING,
                format!("the system clock stepped back by {step_ms} ms; IDs continue from the last issued one"),
                format!(
                    "IDs stay unique and ordered while the step is within snowflake_id.max_clock_drift ({max_drift_ms} ms); check the time source (NTP) of this server."
                ),
            ),
        }
    }
}

impl From<GenerateError> for Error {
    fn from(e: GenerateError) -> Self {
        Error::Generate(e)
    }
}

impl From<CodecError> for Error {
    fn from(e: CodecError) -> Self {
        Error::Decode(e)
    }
}

impl From<TextFormError> for Error {
    fn from(e: TextFormError) -> Self {
        Error::TextForm(e)
    }
}

impl From<PublicIdError> for Error {
    fn from(e: PublicIdError) -> Self {
        Error::PublicId(e)
    }
}

impl From<ConvertError> for Error {
    fn from(e: ConvertError) -> Self {
        Error::Convert(e)
    }
}

impl From<pgrx::spi::SpiError> for Error {
    fn from(e: pgrx::spi::SpiError) -> Self {
        Error::CatalogReadFailed(e.to_string())
    }
}

#[track_caller]
fn emit(level: PgLogLevel, error: Error) {
    let Report {
        code,
        message,
        detail,
        hint,
    } = error.report();
    let mut report =
        ErrorReport::new(code, format!("snowflake_id: {message}"), "snowflake_id").set_hint(hint);
    if let Some(detail) = detail {
        report = report.set_detail(detail);
    }
    report.report(level);
}

/// Raises an ERROR; never returns.
#[track_caller]
pub fn raise(error: impl Into<Error>) -> ! {
    emit(PgLogLevel::ERROR, error.into());
    unreachable!("ERROR does not return")
}

/// Reports a FATAL error: while the postmaster loads preloaded libraries,
/// this stops the server.
#[track_caller]
pub fn stop(error: Error) -> ! {
    emit(PgLogLevel::FATAL, error);
    unreachable!("FATAL does not return")
}

/// Emits a WARNING and continues.
#[track_caller]
pub fn warn(error: Error) {
    emit(PgLogLevel::WARNING, error);
}

#[cfg(test)]
mod tests {
    use super::Held;

    #[test]
    fn every_hold_label_is_unique_and_documented_for_monitoring() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let monitoring = std::fs::read_to_string(root.join("docs/monitoring.md")).unwrap();
        let reference = std::fs::read_to_string(root.join("docs/reference.md")).unwrap();
        let mut labels: Vec<&str> = Held::ALL.iter().map(|h| h.label()).collect();
        for label in &labels {
            let quoted = format!("`{label}`");
            assert!(
                monitoring.contains(&quoted),
                "{label} missing in docs/monitoring.md"
            );
            assert!(
                reference.contains(&quoted),
                "{label} missing in docs/reference.md"
            );
        }
        labels.sort();
        labels.dedup();
        assert_eq!(labels.len(), Held::ALL.len());
    }
}
