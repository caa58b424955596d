//! The registry worker's connection to the registry, over the server's
//! own libpq ([`super::libpq_api`], loaded at run time): the few calls the
//! registry needs, without blocking on the network.
//!
//! Every wait is on the worker's latch or the socket, with a deadline, so
//! a registry that stops answering (paused, partitioned) never hangs the
//! worker, and a shutdown ends a wait at once (except the release, which
//! is allowed its short deadline).

use super::libpq_api::*;
use crate::core::conninfo::{connection_trust, ConnectionTrust};
use crate::pg::bgworker;
use pgrx::pg_sys;
use std::ffi::{c_char, c_int, CStr, CString};
use std::time::{Duration, Instant};

/// A failed call.
#[derive(Debug, Clone)]
pub enum CallError {
    /// The registry could not be reached or did not answer in time.
    Unreachable(String),
    /// The registry answered with an error.
    Refused {
        sqlstate: String,
        message: String,
        detail: Option<String>,
        hint: Option<String>,
    },
}

/// Whether a wait should end early because the server shuts down.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum OnShutdown {
    Abort,
    Finish,
}

fn text(p: *const c_char) -> Option<String> {
    (!p.is_null()).then(|| {
        // SAFETY: relies on: callers pass a pointer libpq returned (null is
        // checked), NUL-terminated and valid until its connection or result is
        // freed, which happens after this call; the text is copied at once.
        unsafe { CStr::from_ptr(p) }
            .to_string_lossy()
            .trim_end()
            .to_string()
    })
}

/// The registry session's settings: its side of the connection's
/// keepalives, the same as this side's (10 s idle, then every 5 s, 3
/// probes); a `statement_timeout` below [`CALL_TIMEOUT`], so that a call
/// this worker gives up on has ended at the registry too, not left behind
/// as a backend still waiting (one more every few seconds, until the
/// registry runs out of connections); and a `lock_timeout` of a second, so
/// that no call waits longer than that on a row another client keeps
/// locked (the registry's functions set the same for their own waits, and
/// name the session that holds the row).
const SESSION_SQL: &str = "SELECT set_config('tcp_keepalives_idle', '10', false), set_config('tcp_keepalives_interval', '5', false), set_config('tcp_keepalives_count', '3', false), set_config('statement_timeout', '4000', false), set_config('lock_timeout', '1000', false)";

/// One open connection to the registry.
pub struct Connection {
    api: &'static Api,
    conn: *mut Conn,
}

impl Drop for Connection {
    fn drop(&mut self) {
        // SAFETY: `conn` is the non-null connection PQconnectStartParams returned
        // (checked in `open`), owned by this value alone and freed only here.
        unsafe { (self.api.finish)(self.conn) };
    }
}

impl Connection {
    fn error(&self) -> String {
        // SAFETY: `conn` is this value's live connection; PQerrorMessage returns
        // a string it owns, which `text` copies at once.
        text(unsafe { (self.api.error_message)(self.conn) }).unwrap_or_default()
    }

    /// Waits until the socket is ready for `events` or the deadline passes.
    fn wait(&self, events: u32, deadline: Instant, on_shutdown: OnShutdown) -> Result<(), String> {
        loop {
            if on_shutdown == OnShutdown::Abort && bgworker::shutdown_requested() {
                return Err("the server is shutting down".into());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("no answer within {} s", CALL_TIMEOUT.as_secs()));
            }
            // SAFETY: `conn` is this value's live connection.
            let sock = unsafe { (self.api.socket)(self.conn) };
            if sock < 0 {
                return Err(self.error());
            }
            // SAFETY: MyLatch is this process's own latch (the registry worker's, the
            // only process that opens connections); `sock` is the connection's
            // socket, checked to be valid; WL_EXIT_ON_PM_DEATH ends the process
            // rather than wait past the postmaster; an ERROR is turned into a Rust
            // panic by pgrx's FFI guard, and Drop then closes the connection.
            let rc = unsafe {
                pg_sys::WaitLatchOrSocket(
                    pg_sys::MyLatch,
                    (pg_sys::WL_LATCH_SET
                        | pg_sys::WL_TIMEOUT
                        | pg_sys::WL_EXIT_ON_PM_DEATH
                        | events) as c_int,
                    sock,
                    left.as_millis().clamp(1, 60_000) as _,
                    pg_sys::PG_WAIT_EXTENSION,
                )
            };
            if rc as u32 & pg_sys::WL_LATCH_SET != 0 {
                // SAFETY: MyLatch is this process's own latch.
                unsafe { pg_sys::ResetLatch(pg_sys::MyLatch) };
            }
            if rc as u32 & events != 0 {
                return Ok(());
            }
        }
    }

    /// The `sslmode` in effect on this connection (after the string, the
    /// environment and a service file), `prefer` if libpq names none.
    fn sslmode(&self) -> String {
        // SAFETY: `conn` is this value's live connection; PQconninfo returns a
        // new array (or null), ended by an entry whose keyword is null, which
        // is only read here and freed once with PQconninfoFree.
        unsafe {
            let options = (self.api.conninfo)(self.conn);
            if options.is_null() {
                return "prefer".into();
            }
            let mut mode = None;
            let mut option = options;
            while !(*option).keyword.is_null() {
                if CStr::from_ptr((*option).keyword).to_bytes() == b"sslmode" {
                    mode = text((*option).val);
                    break;
                }
                option = option.add(1);
            }
            (self.api.conninfo_free)(options);
            mode.unwrap_or_else(|| "prefer".into())
        }
    }

    /// Whether the connection's socket is a Unix-domain one (its own
    /// address family, whatever `host` and `hostaddr` say).
    fn unix_socket(&self) -> bool {
        // SAFETY: `conn` is this value's live, open connection, whose socket
        // PQsocket returns (negative when there is none, checked); getsockname
        // writes at most `len` bytes into `addr`, a zeroed sockaddr_storage,
        // which is large enough for every address family.
        unsafe {
            let sock = (self.api.socket)(self.conn);
            if sock < 0 {
                return false;
            }
            let mut addr: libc::sockaddr_storage = std::mem::zeroed();
            let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            libc::getsockname(sock, (&raw mut addr).cast::<libc::sockaddr>(), &mut len) == 0
                && c_int::from(addr.ss_family) == libc::AF_UNIX
        }
    }

    /// How far this connection can be trusted to reach the registry alone
    /// ([`connection_trust`]).
    pub fn trust(&self) -> ConnectionTrust {
        // SAFETY: `conn` is this value's live, open connection; PQsslInUse
        // returns an int.
        let ssl = unsafe { (self.api.ssl_in_use)(self.conn) } == 1;
        connection_trust(self.unix_socket(), ssl, &self.sslmode())
    }

    /// Opens a connection with libpq's connection string `conninfo`;
    /// `verified_only`: one that is not verified is given up before it
    /// logs in ([`UNVERIFIED_REFUSED`]).
    pub fn open(
        conninfo: &str,
        on_shutdown: OnShutdown,
        verified_only: bool,
    ) -> Result<Connection, String> {
        let api = api()?;
        let deadline = Instant::now() + CALL_TIMEOUT;
        let value = CString::new(conninfo)
            .map_err(|_| "the connection string holds a NUL byte".to_string())?;
        // TCP keepalives on this side first, so that the connection string
        // (expanded from `dbname`, after them) may override them: a
        // registry that vanishes without a word (a partition, a frozen
        // host) is noticed within about 25 s even between calls.
        let keys = [
            c"keepalives".as_ptr(),
            c"keepalives_idle".as_ptr(),
            c"keepalives_interval".as_ptr(),
            c"keepalives_count".as_ptr(),
            c"dbname".as_ptr(),
            c"fallback_application_name".as_ptr(),
            std::ptr::null(),
        ];
        let values = [
            c"1".as_ptr(),
            c"10".as_ptr(),
            c"5".as_ptr(),
            c"3".as_ptr(),
            value.as_ptr(),
            c"snowflake_id registry".as_ptr(),
            std::ptr::null(),
        ];
        // SAFETY: `keys` and `values` are null-terminated arrays of NUL-terminated
        // strings ('static literals and `value`, which outlive the call; libpq
        // copies them), of the same length as PQconnectStartParams requires.
        let conn = unsafe { (api.connect_start_params)(keys.as_ptr(), values.as_ptr(), 1) };
        if conn.is_null() {
            return Err("out of memory".into());
        }
        let c = Connection { api, conn };
        // PQconnectPoll's protocol: wait for what it asks, then call again.
        let mut poll = PGRES_POLLING_WRITING;
        loop {
            if poll == PGRES_POLLING_OK {
                break;
            }
            if poll == PGRES_POLLING_FAILED {
                return Err(c.error());
            }
            // The startup packet is out and TLS, if any, settled: an
            // unverified connection ends here, before the next poll
            // answers the server's authentication request (a password
            // from .pgpass would go to whoever answers). Each host of a
            // multi-host string passes here.
            // SAFETY: `c.conn` is the live connection `c` owns.
            let status = unsafe { (api.status)(c.conn) };
            if verified_only
                && status == CONNECTION_AWAITING_RESPONSE
                && c.trust() == ConnectionTrust::Unverified
            {
                return Err(UNVERIFIED_REFUSED.into());
            }
            match poll {
                PGRES_POLLING_READING => {
                    c.wait(pg_sys::WL_SOCKET_READABLE, deadline, on_shutdown)?
                }
                _ => c.wait(pg_sys::WL_SOCKET_WRITEABLE, deadline, on_shutdown)?,
            }
            // SAFETY: `c.conn` is the live connection `c` owns.
            poll = unsafe { (api.connect_poll)(c.conn) };
        }
        // SAFETY: `c.conn` is the live connection `c` owns.
        if unsafe { (api.status)(c.conn) } != CONNECTION_OK {
            return Err(c.error());
        }
        // SAFETY: `c.conn` is the live connection `c` owns.
        if unsafe { (api.set_nonblocking)(c.conn, 1) } != 0 {
            return Err(c.error());
        }
        // And keepalives on the registry's side of the socket: after a
        // partition its session would otherwise linger for the kernel's
        // default (2 hours) while this server opens another, until the
        // registry runs out of connections (ignored on a Unix socket); with
        // the session's time limits (SESSION_SQL).
        c.query(SESSION_SQL, &[], on_shutdown).map_err(|e| {
            format!("setting the registry session's keepalives and time limits failed: {e:?}")
        })?;
        Ok(c)
    }

    /// Runs `sql` with text parameters and returns its rows as text.
    pub fn query(
        &self,
        sql: &str,
        params: &[Option<String>],
        on_shutdown: OnShutdown,
    ) -> Result<Vec<Vec<Option<String>>>, CallError> {
        let unreachable = CallError::Unreachable;
        let deadline = Instant::now() + CALL_TIMEOUT;
        let sql = CString::new(sql).map_err(|_| unreachable("NUL in query".into()))?;
        let params: Vec<Option<CString>> = params
            .iter()
            .map(|p| {
                p.as_ref()
                    .map(|p| CString::new(p.as_str()).unwrap_or_default())
            })
            .collect();
        let ptrs: Vec<*const c_char> = params
            .iter()
            .map(|p| p.as_ref().map_or(std::ptr::null(), |p| p.as_ptr()))
            .collect();
        let api = self.api;
        // SAFETY: `self.conn` is this value's live connection; `sql` and the
        // parameters are NUL-terminated CStrings (null pointers for SQL NULL) that
        // outlive the call, `ptrs` holds exactly ptrs.len() entries, and null
        // types, lengths and formats mean text parameters, as libpq allows; libpq
        // copies everything before it returns.
        let sent = unsafe {
            (api.send_query_params)(
                self.conn,
                sql.as_ptr(),
                ptrs.len() as c_int,
                std::ptr::null(),
                ptrs.as_ptr(),
                std::ptr::null(),
                std::ptr::null(),
                0,
            )
        };
        if sent != 1 {
            return Err(unreachable(self.error()));
        }
        loop {
            // SAFETY: `self.conn` is this value's live connection.
            match unsafe { (api.flush)(self.conn) } {
                0 => break,
                1 => self
                    .wait(pg_sys::WL_SOCKET_WRITEABLE, deadline, on_shutdown)
                    .map_err(unreachable)?,
                _ => return Err(unreachable(self.error())),
            }
        }
        let mut rows = Vec::new();
        let mut failure = None;
        loop {
            // SAFETY: `self.conn` is this value's live connection.
            while unsafe { (api.is_busy)(self.conn) } != 0 {
                self.wait(pg_sys::WL_SOCKET_READABLE, deadline, on_shutdown)
                    .map_err(unreachable)?;
                // SAFETY: `self.conn` is this value's live connection.
                if unsafe { (api.consume_input)(self.conn) } == 0 {
                    return Err(unreachable(self.error()));
                }
            }
            // SAFETY: `self.conn` is this value's live connection.
            let res = unsafe { (api.get_result)(self.conn) };
            if res.is_null() {
                break;
            }
            // SAFETY: `res` is the non-null result PQgetResult just returned, not
            // cleared before the end of this iteration.
            let status = unsafe { (api.result_status)(res) };
            if status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK {
                // SAFETY: `res` is a live, non-null result.
                let (n, m) = unsafe { ((api.ntuples)(res), (api.nfields)(res)) };
                for i in 0..n {
                    rows.push(
                        (0..m)
                            // SAFETY: `res` is a live result and `i` < ntuples, `j` <
                            // nfields name one of its fields; `text` copies the value
                            // before `res` is cleared.
                            .map(|j| unsafe {
                                if (api.get_is_null)(res, i, j) != 0 {
                                    None
                                } else {
                                    text((api.get_value)(res, i, j))
                                }
                            })
                            .collect(),
                    );
                }
            } else if failure.is_none() {
                // SAFETY: `res` is a live result (the closure is called only before it
                // is cleared); `text` copies the field at once.
                let field = |f| text(unsafe { (api.result_error_field)(res, f) });
                failure = Some(match field(PG_DIAG_SQLSTATE) {
                    Some(sqlstate) => CallError::Refused {
                        sqlstate,
                        message: field(PG_DIAG_MESSAGE_PRIMARY).unwrap_or_default(),
                        detail: field(PG_DIAG_MESSAGE_DETAIL),
                        hint: field(PG_DIAG_MESSAGE_HINT),
                    },
                    None => unreachable(
                        // SAFETY: `res` is a live result; `text` copies the message at once.
                        text(unsafe { (api.result_error_message)(res) }).unwrap_or_default(),
                    ),
                });
            }
            // SAFETY: `res` came from PQgetResult and is cleared once, here; all
            // that was read from it has been copied.
            unsafe { (api.clear)(res) };
        }
        match failure {
            Some(f) => Err(f),
            None => Ok(rows),
        }
    }
}

/// Why an unverified connection was given up unused
/// (`snowflake_id.registry_allow_unverified = off`).
pub const UNVERIFIED_REFUSED: &str = "the connection is not verified (neither TLS with sslmode=verify-full nor a Unix-domain socket; with GSSAPI encryption, gssencmode=disable is needed too), so it was closed before logging in: anyone on the registry's address or network path could answer in its name and grant a node id another server holds; connect with sslmode=verify-full and sslrootcert, or through a Unix-domain socket, or set snowflake_id.registry_allow_unverified = on to accept the risk";

/// How long a connection attempt or a call may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);
