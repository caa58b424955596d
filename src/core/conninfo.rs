//! The registry's connection string, read as libpq reads it, for two
//! purposes: to refuse a secret in it, and to show it without one.
//!
//! `snowflake_id.registry` is a `GUC_SUPERUSER_ONLY` setting, yet every
//! member of `pg_read_all_settings` reads it (`pg_monitor`, the role the
//! monitoring docs give the exporter, is one), and no setting flag hides a
//! value from that role. So the setting must hold no secret: a `password`
//! or `sslpassword` in it is refused at start ([`secret_in`]), and the
//! password goes where libpq looks for it outside the string (a password
//! file, `passfile=`, a service file, a client certificate).
//!
//! Two forms, as libpq's `conninfo_parse` and `conninfo_uri_parse`:
//! - `key = value` pairs separated by any white space (a tab too), a value
//!   either bare (up to white space, `\` escaping one character) or in
//!   single quotes (`\` escaping one character);
//! - a URI `postgresql://[user[:password]@]hosts[/dbname][?key=value&...]`
//!   (also `postgres://`), whose parameter names are percent-decoded.

/// The parameters that carry a secret (libpq 18's included: the OAuth
/// client secret and the SCRAM keys act as passwords).
const SECRET_KEYS: [&str; 5] = [
    "password",
    "sslpassword",
    "oauth_client_secret",
    "scram_client_key",
    "scram_server_key",
];

/// The secret a parameter name stands for, if any. Compared without case:
/// libpq refuses `PASSWORD=` as an unknown option, but the value would
/// still sit in the setting, readable and logged.
fn secret_key(key: &str) -> Option<&'static str> {
    SECRET_KEYS
        .into_iter()
        .find(|secret| secret.eq_ignore_ascii_case(key))
}

/// One parameter of a connection string: its name, and the byte range of
/// its value in the string (as written: quotes and escapes included).
#[derive(Debug, PartialEq, Eq)]
struct Param {
    key: String,
    value: std::ops::Range<usize>,
}

fn is_space(c: u8) -> bool {
    // C's isspace: space, \t, \n, \v, \f, \r.
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The `key = value` pairs, or `None` where libpq would refuse the string
/// (a key without `=`, an unterminated quote).
fn key_value_params(s: &str) -> Option<Vec<Param>> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut params = Vec::new();
    loop {
        while i < b.len() && is_space(b[i]) {
            i += 1;
        }
        if i == b.len() {
            return Some(params);
        }
        let key_start = i;
        while i < b.len() && b[i] != b'=' && !is_space(b[i]) {
            i += 1;
        }
        let key = s[key_start..i].to_string();
        while i < b.len() && is_space(b[i]) {
            i += 1;
        }
        if i == b.len() || b[i] != b'=' {
            return None;
        }
        i += 1;
        while i < b.len() && is_space(b[i]) {
            i += 1;
        }
        let value_start = i;
        if i < b.len() && b[i] == b'\'' {
            i += 1;
            loop {
                match b.get(i) {
                    None => return None,
                    Some(b'\\') => i += 2,
                    Some(b'\'') => {
                        i += 1;
                        break;
                    }
                    Some(_) => i += 1,
                }
            }
        } else {
            while i < b.len() && !is_space(b[i]) {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
        }
        let end = i.min(b.len());
        params.push(Param {
            key,
            value: value_start..end,
        });
        i = end;
    }
}

/// The URI's scheme, if the string is one.
fn uri_scheme(s: &str) -> Option<&'static str> {
    ["postgresql://", "postgres://"]
        .into_iter()
        .find(|scheme| s.starts_with(scheme))
}

/// `%XX` decoded (a bad escape is kept as written: the name it spells is
/// then no secret's name, and libpq refuses the string anyway).
fn percent_decoded(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A URI's parts: the byte range of the password in its user part, if
/// any, and its query parameters.
fn uri_params(s: &str, scheme: &str) -> (Option<std::ops::Range<usize>>, Vec<Param>) {
    let rest_start = scheme.len();
    let rest = &s[rest_start..];
    // As libpq reads it: the user part runs to the first '@' met before
    // any '/' (a '?' inside it belongs to the password), and the
    // parameters start at the first '?' after it.
    let user_end = rest
        .find(['@', '/'])
        .filter(|&i| rest.as_bytes()[i] == b'@');
    let password = user_end.and_then(|at| {
        rest[..at]
            .find(':')
            .map(|colon| rest_start + colon + 1..rest_start + at)
    });
    let after_user = user_end.map_or(0, |at| at + 1);
    let mut params = Vec::new();
    if let Some(q) = rest[after_user..].find('?') {
        let mut offset = rest_start + after_user + q + 1;
        for pair in s[offset..].split('&') {
            let (key, value_offset) = match pair.find('=') {
                Some(eq) => (&pair[..eq], eq + 1),
                None => (pair, pair.len()),
            };
            params.push(Param {
                key: percent_decoded(key),
                value: offset + value_offset..offset + pair.len(),
            });
            offset += pair.len() + 1;
        }
    }
    (password, params)
}

/// Which secret a connection string holds, if any: `"password"` or
/// `"sslpassword"` as a parameter, or `"password"` in a URI's user part. A
/// string libpq cannot parse is treated as holding one if the word
/// appears in it at all (the safe side: it is refused either way).
pub fn secret_in(conninfo: &str) -> Option<&'static str> {
    let s = conninfo.trim();
    if let Some(scheme) = uri_scheme(s) {
        let (password, params) = uri_params(s, scheme);
        if password.is_some() {
            return Some("password");
        }
        return params.iter().find_map(|p| secret_key(&p.key));
    }
    match key_value_params(s) {
        Some(params) => params.iter().find_map(|p| secret_key(&p.key)),
        None => s.contains("password").then_some("password"),
    }
}

/// A connection string as it may be shown in messages and logs: every
/// secret's value replaced by `***` (the server refuses to start with one,
/// so this is a second line of defence).
pub fn display(conninfo: &str) -> String {
    let s = conninfo.trim();
    let mut hidden: Vec<std::ops::Range<usize>> = Vec::new();
    let is_secret = |p: &Param| secret_key(&p.key).is_some();
    if let Some(scheme) = uri_scheme(s) {
        let (password, params) = uri_params(s, scheme);
        hidden.extend(password);
        hidden.extend(params.into_iter().filter(is_secret).map(|p| p.value));
    } else {
        match key_value_params(s) {
            Some(params) => hidden.extend(params.into_iter().filter(is_secret).map(|p| p.value)),
            None if s.contains("password") => {
                return "(a connection string libpq cannot read)".to_string()
            }
            None => {}
        }
    }
    let mut out = String::new();
    let mut at = 0;
    for range in hidden {
        out.push_str(&s[at..range.start]);
        out.push_str("***");
        at = range.end;
    }
    out.push_str(&s[at..]);
    out
}

/// How far the server can trust that its registry connection reaches the
/// registry and nothing in between, as libpq made it: the registry's
/// answers are checked against the rules (`registry::check_*`), but a
/// plausible lie (a lower floor) is caught only by a connection no one on
/// the network path can answer on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionTrust {
    /// A Unix-domain socket: no network path.
    Socket,
    /// TLS with `sslmode=verify-full`: the registry's certificate, signed
    /// by the trusted root, names the host connected to.
    Verified,
    /// TCP without TLS, or TLS without checking the host name
    /// (`sslmode=require` or `verify-ca`): anyone on the path, or any
    /// server with a certificate of the same authority, can answer.
    Unverified,
}

impl ConnectionTrust {
    /// What `snowflake_stats().registry_connection` shows.
    pub fn label(self) -> &'static str {
        match self {
            ConnectionTrust::Socket => "socket",
            ConnectionTrust::Verified => "verified",
            ConnectionTrust::Unverified => "unverified",
        }
    }

    /// The value kept in shared memory (0: no connection yet).
    pub fn code(self) -> u32 {
        match self {
            ConnectionTrust::Socket => 1,
            ConnectionTrust::Verified => 2,
            ConnectionTrust::Unverified => 3,
        }
    }

    pub fn from_code(code: u32) -> Option<ConnectionTrust> {
        match code {
            1 => Some(ConnectionTrust::Socket),
            2 => Some(ConnectionTrust::Verified),
            3 => Some(ConnectionTrust::Unverified),
            _ => None,
        }
    }
}

/// The trust of an open connection, from what it is and what libpq
/// reports of it: whether its socket is a Unix-domain one (the socket's
/// own address family: `PQhost` names a socket directory even when
/// `hostaddr` sent the connection over TCP), whether TLS is in use
/// (`PQsslInUse`) and the `sslmode` in effect (`PQconninfo`, after the
/// setting, the environment and a service file). Checking the chain
/// without the host name (`verify-ca`) is not enough: a certificate the
/// same authority gave another server (the registry's standby, any server
/// of the fleet) would pass.
pub fn connection_trust(unix_socket: bool, ssl_in_use: bool, sslmode: &str) -> ConnectionTrust {
    if unix_socket {
        ConnectionTrust::Socket
    } else if ssl_in_use && sslmode == "verify-full" {
        ConnectionTrust::Verified
    } else {
        ConnectionTrust::Unverified
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn secrets_are_found_in_every_form() {
        for (conninfo, secret) in [
            ("host=r port=5432 password=s3cret user=u", Some("password")),
            ("host=r\tpassword\t=\ts3cret", Some("password")),
            ("host=r password = 'a b\\'c' dbname=x", Some("password")),
            ("host=r sslpassword=k", Some("sslpassword")),
            ("postgresql://u:pw@h:5/db", Some("password")),
            ("postgres://u:pw@h1:5,h2:6/db", Some("password")),
            (
                "postgresql://u@h/db?sslmode=require&password=x",
                Some("password"),
            ),
            ("postgresql://h/db?sslpassword=x", Some("sslpassword")),
            ("postgresql://h/db?pass%77ord=x", Some("password")),
            // libpq: the user part ends at the first '@' before any '/'.
            ("postgresql://reg:pa?ss@registry/db", Some("password")),
            ("postgresql://u?@h/db?password=x", Some("password")),
            ("host=r PASSWORD=x", Some("password")),
            ("host=r oauth_client_secret=x", Some("oauth_client_secret")),
            ("host=r scram_client_key=x", Some("scram_client_key")),
            ("host=r password='unterminated", Some("password")),
            ("host=r port=5432 user=u dbname=reg", None),
            ("host=r passfile=/etc/pg/pass service=reg", None),
            ("postgresql://u@h:5/db?passfile=%2Fetc%2Fpass", None),
            ("application_name='my password manager'", None),
            ("", None),
        ] {
            assert_eq!(secret_in(conninfo), secret, "{conninfo}");
        }
    }

    #[test]
    fn secrets_are_not_shown() {
        for (conninfo, shown) in [
            (
                "host=r port=5432 password=s3cret user=u",
                "host=r port=5432 password=*** user=u",
            ),
            ("host=r\tpassword\t=\ts3cret", "host=r\tpassword\t=\t***"),
            (
                "host=r password = 'a b\\'c' dbname=x",
                "host=r password = *** dbname=x",
            ),
            ("sslpassword=k host=r", "sslpassword=*** host=r"),
            (
                "postgresql://u:pw@h:5/db?sslmode=require&password=x",
                "postgresql://u:***@h:5/db?sslmode=require&password=***",
            ),
            (
                "postgresql://h/db?sslpassword=x&sslmode=verify-full",
                "postgresql://h/db?sslpassword=***&sslmode=verify-full",
            ),
            ("service=reg", "service=reg"),
            (
                "postgresql://reg:pa?ss@registry/db",
                "postgresql://reg:***@registry/db",
            ),
            (
                "host=r password='unterminated",
                "(a connection string libpq cannot read)",
            ),
        ] {
            assert_eq!(display(conninfo), shown, "{conninfo}");
        }
    }

    proptest! {
        /// Whatever surrounds it, a password value never survives display.
        #[test]
        fn a_password_value_is_never_shown(
            before in "[a-z]{1,8}=[a-z0-9]{1,8}",
            space in "[ \t]{1,3}",
            secret in "[A-Z]{12}",
            key in prop::sample::select(vec!["password", "sslpassword"]),
        ) {
            let conninfo = format!("{before}{space}{key}{space}={space}{secret}{space}{before}");
            prop_assert!(!display(&conninfo).contains(&secret));
            prop_assert_eq!(secret_in(&conninfo), Some(key));
            let uri = format!("postgresql://u:{secret}@h/db?{key}={secret}");
            prop_assert!(!display(&uri).contains(&secret));
        }
    }

    #[test]
    fn only_a_socket_or_verify_full_is_trusted() {
        use ConnectionTrust::*;
        assert_eq!(connection_trust(true, false, "prefer"), Socket);
        assert_eq!(connection_trust(true, false, "disable"), Socket);
        assert_eq!(connection_trust(false, true, "verify-full"), Verified);
        // TLS negotiated under a weaker mode, or none at all.
        for (ssl, mode) in [
            (true, "verify-ca"),
            (true, "require"),
            (true, "prefer"),
            (false, "prefer"),
            (false, "disable"),
            // (verify-full with no TLS in use cannot connect; if libpq
            // ever reported it, it is not trusted.)
            (false, "verify-full"),
        ] {
            assert_eq!(
                connection_trust(false, ssl, mode),
                Unverified,
                "{ssl} {mode}"
            );
        }
        for t in [Socket, Verified, Unverified] {
            assert_eq!(ConnectionTrust::from_code(t.code()), Some(t));
        }
        assert_eq!(ConnectionTrust::from_code(0), None);
    }
}
