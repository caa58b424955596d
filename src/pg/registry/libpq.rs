//! The server's own libpq, loaded at run time by the registry worker, and the
//! few calls the registry needs, without blocking on the network.
//!
//! Why libpq: it is what `postgres_fdw`, `dblink`, Citus and
//! pg_auto_failover use to reach another server, so the registry's
//! connection string means exactly what it means to `psql`: TLS
//! (`sslmode`, certificates), `.pgpass`, service files, several hosts with
//! `target_session_attrs`, Kerberos. A Rust client would give us none of
//! that for free. Why loaded at run time (`dlopen`) rather than linked:
//! only the registry worker needs it, a server without a registry never loads
//! it, and the build needs no libpq headers or link step on any of the
//! supported versions. It is looked up next to the server's own libraries
//! (`get_lib_path`: a relocatable install finds its own copy), then by the
//! dynamic linker's search.
//!
//! Every wait is on the worker's latch or the socket, with a deadline, so
//! a registry that stops answering (paused, partitioned) never hangs the
//! worker, and a shutdown ends a wait at once (except the release, which
//! is allowed its short deadline).

use crate::core::conninfo::{connection_trust, ConnectionTrust};
use crate::pg::bgworker;
use pgrx::pg_sys;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

type Conn = c_void;
type Res = c_void;

// libpq's enum values (libpq-fe.h), stable since PostgreSQL 7.
const CONNECTION_OK: c_int = 0;
const PGRES_POLLING_FAILED: c_int = 0;
const PGRES_POLLING_READING: c_int = 1;
const PGRES_POLLING_WRITING: c_int = 2;
const PGRES_POLLING_OK: c_int = 3;
const PGRES_COMMAND_OK: c_int = 1;
const PGRES_TUPLES_OK: c_int = 2;
const PG_DIAG_SQLSTATE: c_int = b'C' as c_int;
const PG_DIAG_MESSAGE_PRIMARY: c_int = b'M' as c_int;
const PG_DIAG_MESSAGE_DETAIL: c_int = b'D' as c_int;
const PG_DIAG_MESSAGE_HINT: c_int = b'H' as c_int;

/// The libpq functions used, resolved once per process.
struct Api {
    connect_start_params:
        unsafe extern "C" fn(*const *const c_char, *const *const c_char, c_int) -> *mut Conn,
    connect_poll: unsafe extern "C" fn(*mut Conn) -> c_int,
    status: unsafe extern "C" fn(*const Conn) -> c_int,
    error_message: unsafe extern "C" fn(*const Conn) -> *const c_char,
    socket: unsafe extern "C" fn(*const Conn) -> c_int,
    set_nonblocking: unsafe extern "C" fn(*mut Conn, c_int) -> c_int,
    send_query_params: unsafe extern "C" fn(
        *mut Conn,
        *const c_char,
        c_int,
        *const pg_sys::Oid,
        *const *const c_char,
        *const c_int,
        *const c_int,
        c_int,
    ) -> c_int,
    flush: unsafe extern "C" fn(*mut Conn) -> c_int,
    consume_input: unsafe extern "C" fn(*mut Conn) -> c_int,
    is_busy: unsafe extern "C" fn(*mut Conn) -> c_int,
    get_result: unsafe extern "C" fn(*mut Conn) -> *mut Res,
    result_status: unsafe extern "C" fn(*const Res) -> c_int,
    result_error_field: unsafe extern "C" fn(*const Res, c_int) -> *const c_char,
    result_error_message: unsafe extern "C" fn(*const Res) -> *const c_char,
    ntuples: unsafe extern "C" fn(*const Res) -> c_int,
    nfields: unsafe extern "C" fn(*const Res) -> c_int,
    get_value: unsafe extern "C" fn(*const Res, c_int, c_int) -> *const c_char,
    get_is_null: unsafe extern "C" fn(*const Res, c_int, c_int) -> c_int,
    clear: unsafe extern "C" fn(*mut Res),
    finish: unsafe extern "C" fn(*mut Conn),
    host: unsafe extern "C" fn(*const Conn) -> *const c_char,
    ssl_in_use: unsafe extern "C" fn(*const Conn) -> c_int,
    conninfo: unsafe extern "C" fn(*mut Conn) -> *mut ConninfoOption,
    conninfo_free: unsafe extern "C" fn(*mut ConninfoOption),
}

/// libpq's `PQconninfoOption` (libpq-fe.h, unchanged since PostgreSQL
/// 7.0): `PQconninfo` returns an array of them ended by a null keyword.
#[repr(C)]
struct ConninfoOption {
    keyword: *const c_char,
    envvar: *const c_char,
    compiled: *const c_char,
    val: *const c_char,
    label: *const c_char,
    dispchar: *const c_char,
    dispsize: c_int,
}

static API: OnceLock<Result<Api, String>> = OnceLock::new();

fn api() -> Result<&'static Api, String> {
    API.get_or_init(load).as_ref().map_err(Clone::clone)
}

/// Where the server's libraries are (`pg_config --libdir`, relocated).
fn server_libdir() -> Option<String> {
    let mut buf = vec![0 as c_char; pg_sys::MAXPGPATH as usize];
    // SAFETY: my_exec_path is a process-local char[MAXPGPATH] global, set when
    // the process started (NUL-terminated; empty when unset, which is
    // checked). get_lib_path writes at most MAXPGPATH bytes, NUL-terminated,
    // into `buf`, which has exactly that size, and CStr::from_ptr reads it
    // before `buf` is dropped.
    unsafe {
        let exec = (&raw const pg_sys::my_exec_path).cast::<c_char>();
        if *exec == 0 {
            return None;
        }
        pg_sys::get_lib_path(exec, buf.as_mut_ptr());
        Some(CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned())
    }
}

// The transmutes' target types are the fields' types.
#[allow(clippy::missing_transmute_annotations)]
fn load() -> Result<Api, String> {
    let mut candidates = Vec::new();
    if let Some(dir) = server_libdir() {
        candidates.push(format!("{dir}/libpq.so.5"));
    }
    candidates.push("libpq.so.5".to_string());
    let mut tried = Vec::new();
    let handle = candidates.iter().find_map(|path| {
        let c = CString::new(path.as_str()).ok()?;
        // SAFETY: `c` is a NUL-terminated path that outlives the call; dlopen
        // runs in this single-threaded process, and the handle is never closed.
        let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if h.is_null() {
            // SAFETY: dlerror takes no argument; its message is read below before
            // any other dl* call (single-threaded process).
            let why = unsafe { libc::dlerror() };
            let why = if why.is_null() {
                String::new()
            } else {
                // SAFETY: `why` is dlerror's non-null (checked), NUL-terminated
                // message, valid until the next dl* call; it is copied at once.
                unsafe { CStr::from_ptr(why) }
                    .to_string_lossy()
                    .into_owned()
            };
            tried.push(format!("{path}: {why}"));
            None
        } else {
            Some(h)
        }
    });
    let Some(handle) = handle else {
        return Err(format!("libpq could not be loaded ({})", tried.join("; ")));
    };
    macro_rules! sym {
        ($name:literal) => {{
            // SAFETY: `handle` is the live handle dlopen returned (never closed),
            // and the name is a NUL-terminated literal.
            let p = unsafe { libc::dlsym(handle, concat!($name, "\0").as_ptr().cast()) };
            if p.is_null() {
                return Err(format!("libpq has no {}", $name));
            }
            // SAFETY: the symbol is libpq's function of that name, whose C
            // signature the field's type spells.
            unsafe { std::mem::transmute::<*mut c_void, _>(p) }
        }};
    }
    Ok(Api {
        connect_start_params: sym!("PQconnectStartParams"),
        connect_poll: sym!("PQconnectPoll"),
        status: sym!("PQstatus"),
        error_message: sym!("PQerrorMessage"),
        socket: sym!("PQsocket"),
        set_nonblocking: sym!("PQsetnonblocking"),
        send_query_params: sym!("PQsendQueryParams"),
        flush: sym!("PQflush"),
        consume_input: sym!("PQconsumeInput"),
        is_busy: sym!("PQisBusy"),
        get_result: sym!("PQgetResult"),
        result_status: sym!("PQresultStatus"),
        result_error_field: sym!("PQresultErrorField"),
        result_error_message: sym!("PQresultErrorMessage"),
        ntuples: sym!("PQntuples"),
        nfields: sym!("PQnfields"),
        get_value: sym!("PQgetvalue"),
        get_is_null: sym!("PQgetisnull"),
        clear: sym!("PQclear"),
        finish: sym!("PQfinish"),
        host: sym!("PQhost"),
        ssl_in_use: sym!("PQsslInUse"),
        conninfo: sym!("PQconninfo"),
        conninfo_free: sym!("PQconninfoFree"),
    })
}

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

/// The registry's side of the connection's keepalives: the same as this
/// side's (10 s idle, then every 5 s, 3 probes).
const KEEPALIVES_SQL: &str = "SELECT set_config('tcp_keepalives_idle', '10', false), set_config('tcp_keepalives_interval', '5', false), set_config('tcp_keepalives_count', '3', false)";

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

    /// How far this connection can be trusted to reach the registry alone
    /// ([`connection_trust`]).
    pub fn trust(&self) -> ConnectionTrust {
        // SAFETY: `conn` is this value's live, open connection; PQhost returns
        // a string it owns (copied at once by `text`), PQsslInUse an int.
        let (host, ssl) = unsafe {
            (
                text((self.api.host)(self.conn)).unwrap_or_default(),
                (self.api.ssl_in_use)(self.conn) == 1,
            )
        };
        connection_trust(&host, ssl, &self.sslmode())
    }

    /// Opens a connection with libpq's connection string `conninfo`.
    pub fn open(conninfo: &str, on_shutdown: OnShutdown) -> Result<Connection, String> {
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
            match poll {
                PGRES_POLLING_OK => break,
                PGRES_POLLING_FAILED => return Err(c.error()),
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
        // registry runs out of connections. (Session settings; ignored on a
        // Unix socket.)
        c.query(KEEPALIVES_SQL, &[], on_shutdown)
            .map_err(|e| format!("setting the registry session's TCP keepalives failed: {e:?}"))?;
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

/// How long a connection attempt or a call may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);
