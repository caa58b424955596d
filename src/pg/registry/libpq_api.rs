//! The libpq functions the registry worker calls, resolved at run time
//! (`dlopen`) from the server's own libpq, and the few libpq constants and
//! structs they need (libpq-fe.h, stable since PostgreSQL 7).
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

use pgrx::pg_sys;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

pub(super) type Conn = c_void;
pub(super) type Res = c_void;

// libpq's enum values (libpq-fe.h), stable since PostgreSQL 7.
pub(super) const CONNECTION_OK: c_int = 0;
/// `CONNECTION_AWAITING_RESPONSE`: the startup packet is sent, the
/// server's authentication request not yet answered.
pub(super) const CONNECTION_AWAITING_RESPONSE: c_int = 4;
pub(super) const PGRES_POLLING_FAILED: c_int = 0;
pub(super) const PGRES_POLLING_READING: c_int = 1;
pub(super) const PGRES_POLLING_WRITING: c_int = 2;
pub(super) const PGRES_POLLING_OK: c_int = 3;
pub(super) const PGRES_COMMAND_OK: c_int = 1;
pub(super) const PGRES_TUPLES_OK: c_int = 2;
pub(super) const PG_DIAG_SQLSTATE: c_int = b'C' as c_int;
pub(super) const PG_DIAG_MESSAGE_PRIMARY: c_int = b'M' as c_int;
pub(super) const PG_DIAG_MESSAGE_DETAIL: c_int = b'D' as c_int;
pub(super) const PG_DIAG_MESSAGE_HINT: c_int = b'H' as c_int;

/// The libpq functions used, resolved once per process.
pub(super) struct Api {
    pub(super) connect_start_params:
        unsafe extern "C" fn(*const *const c_char, *const *const c_char, c_int) -> *mut Conn,
    pub(super) connect_poll: unsafe extern "C" fn(*mut Conn) -> c_int,
    pub(super) status: unsafe extern "C" fn(*const Conn) -> c_int,
    pub(super) error_message: unsafe extern "C" fn(*const Conn) -> *const c_char,
    pub(super) socket: unsafe extern "C" fn(*const Conn) -> c_int,
    pub(super) set_nonblocking: unsafe extern "C" fn(*mut Conn, c_int) -> c_int,
    pub(super) send_query_params: unsafe extern "C" fn(
        *mut Conn,
        *const c_char,
        c_int,
        *const pg_sys::Oid,
        *const *const c_char,
        *const c_int,
        *const c_int,
        c_int,
    ) -> c_int,
    pub(super) flush: unsafe extern "C" fn(*mut Conn) -> c_int,
    pub(super) consume_input: unsafe extern "C" fn(*mut Conn) -> c_int,
    pub(super) is_busy: unsafe extern "C" fn(*mut Conn) -> c_int,
    pub(super) get_result: unsafe extern "C" fn(*mut Conn) -> *mut Res,
    pub(super) result_status: unsafe extern "C" fn(*const Res) -> c_int,
    pub(super) result_error_field: unsafe extern "C" fn(*const Res, c_int) -> *const c_char,
    pub(super) result_error_message: unsafe extern "C" fn(*const Res) -> *const c_char,
    pub(super) ntuples: unsafe extern "C" fn(*const Res) -> c_int,
    pub(super) nfields: unsafe extern "C" fn(*const Res) -> c_int,
    pub(super) get_value: unsafe extern "C" fn(*const Res, c_int, c_int) -> *const c_char,
    pub(super) get_is_null: unsafe extern "C" fn(*const Res, c_int, c_int) -> c_int,
    pub(super) clear: unsafe extern "C" fn(*mut Res),
    pub(super) finish: unsafe extern "C" fn(*mut Conn),
    pub(super) ssl_in_use: unsafe extern "C" fn(*const Conn) -> c_int,
    pub(super) conninfo: unsafe extern "C" fn(*mut Conn) -> *mut ConninfoOption,
    pub(super) conninfo_free: unsafe extern "C" fn(*mut ConninfoOption),
}

/// libpq's `PQconninfoOption` (libpq-fe.h, unchanged since PostgreSQL
/// 7.0): `PQconninfo` returns an array of them ended by a null keyword.
#[repr(C)]
pub(super) struct ConninfoOption {
    pub(super) keyword: *const c_char,
    pub(super) envvar: *const c_char,
    pub(super) compiled: *const c_char,
    pub(super) val: *const c_char,
    pub(super) label: *const c_char,
    pub(super) dispchar: *const c_char,
    pub(super) dispsize: c_int,
}

static API: OnceLock<Result<Api, String>> = OnceLock::new();

pub(super) fn api() -> Result<&'static Api, String> {
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
        ssl_in_use: sym!("PQsslInUse"),
        conninfo: sym!("PQconninfo"),
        conninfo_free: sym!("PQconninfoFree"),
    })
}
