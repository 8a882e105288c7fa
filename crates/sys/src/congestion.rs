//! TCP congestion control: the algorithm a socket uses (`TCP_CONGESTION`), choosing another
//! (iperf3's `-C`), and what this kernel offers.
//!
//! The sender's algorithm decides more than the window on a fast path: Linux's `bbr` paces
//! every segment with a timer of its own, and on loopback in a virtual machine each of those
//! timers costs the sender a hypervisor exit; `cubic` sends as fast as the window allows.
//! Both ends of a comparison must therefore use the same one, and the report names it.

use std::os::fd::AsFd;

use anyhow::{Result, anyhow};

/// The longest name the kernel takes (`TCP_CA_NAME_MAX`, 16, less its NUL): the wire's limit.
pub const MAX_NAME: usize = tsperf_proto::tcp::MAX_CONGESTION;

/// Checks a name given on the command line: 1 to [`MAX_NAME`] ASCII letters, digits, `_` or
/// `-`, as the kernel's algorithms are named (the rule the wire holds a peer's name to,
/// [`tsperf_proto::tcp::Congestion`]).
pub fn parse_name(text: &str) -> std::result::Result<String, String> {
    if tsperf_proto::tcp::Congestion::new(text).is_none() {
        return Err(format!(
            "'{}' is not a congestion control name: expected 1 to {MAX_NAME} letters, digits, \
             '_' or '-', as 'cubic' or 'bbr' ({})",
            text.escape_debug(),
            offered_here()
        ));
    }
    Ok(text.to_owned())
}

/// The algorithm `sock` uses; None where the kernel will not say.
pub fn of<S: AsFd>(sock: &S) -> Option<String> {
    #[cfg(target_os = "linux")]
    {
        let name = socket2::SockRef::from(sock).tcp_congestion().ok()?;
        let name = String::from_utf8_lossy(&name);
        let name = name.trim_end_matches('\0');
        (!name.is_empty()).then(|| name.to_owned())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = sock;
        None
    }
}

/// Makes `sock` use the algorithm `name`; the error names it and says what this kernel offers.
pub fn set<S: AsFd>(sock: &S, name: &str) -> Result<()> {
    #[cfg(target_os = "linux")]
    let result = socket2::SockRef::from(sock).set_tcp_congestion(name.as_bytes());
    #[cfg(not(target_os = "linux"))]
    let result: std::io::Result<()> = {
        let _ = sock;
        Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
    };
    result.map_err(|e| match e.raw_os_error() {
        Some(libc::ENOENT) => anyhow!(
            "this kernel has no TCP congestion control '{name}' ({})",
            offered_here()
        ),
        Some(libc::EPERM) => anyhow!(
            "TCP congestion control '{name}' is not one this user may choose ({}; root may \
             choose any the kernel has)",
            offered_here()
        ),
        _ => anyhow!("cannot use TCP congestion control '{name}': {e}"),
    })
}

/// The algorithms this kernel has loaded.
const AVAILABLE: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";

/// [`set`] for a name a peer sent (a reverse stream's hello): only an algorithm the kernel has
/// loaded (`tcp_available_congestion_control`). For a privileged process the kernel would
/// otherwise load the module `tcp_NAME` first, whatever it is, on the peer's word.
pub fn set_loaded<S: AsFd>(sock: &S, name: &str) -> Result<()> {
    let loaded = std::fs::read_to_string(AVAILABLE).unwrap_or_default();
    if !loaded.split_whitespace().any(|n| n == name) {
        return Err(anyhow!(
            "this kernel has no TCP congestion control '{name}' ({})",
            offered_here()
        ));
    }
    set(sock, name)
}

/// What this kernel offers (`tcp_available_congestion_control`) and allows a process without
/// privileges (`tcp_allowed_congestion_control`), and its default, for an error message.
pub fn offered_here() -> String {
    let read = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}"))
            .ok()
            .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|s| !s.is_empty())
    };
    match (
        read("tcp_available_congestion_control"),
        read("tcp_allowed_congestion_control"),
        read("tcp_congestion_control"),
    ) {
        (Some(available), allowed, default) => format!(
            "available: {available}{}{}",
            allowed.map_or(String::new(), |a| format!(
                "; allowed without privileges: {a}"
            )),
            default.map_or(String::new(), |d| format!("; default: {d}")),
        ),
        _ => "this system does not list its algorithms".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert_eq!(parse_name("cubic").unwrap(), "cubic");
        assert_eq!(parse_name("bbr").unwrap(), "bbr");
        assert_eq!(parse_name("highspeed_2-x").unwrap(), "highspeed_2-x");
        for bad in ["", "a b", "cubic\n", "../reno", "sixteen_letters_", "bé"] {
            let e = parse_name(bad).unwrap_err();
            assert!(e.contains("not a congestion control name"), "{bad:?}: {e}");
        }
    }

    /// A name from a peer is taken only if the kernel has it loaded: asking the kernel for one
    /// it has not would, for a privileged server, load the module `tcp_NAME` (any such module,
    /// congestion control or not) on a remote client's word.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_peers_name_must_be_loaded_already() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let loaded = std::fs::read_to_string(AVAILABLE).unwrap();
        assert!(loaded.split_whitespace().any(|n| n == "reno"), "{loaded}");
        set_loaded(&s, "reno").unwrap();
        assert_eq!(of(&s).as_deref(), Some("reno"));
        for name in ["diag", "no_such_algo"] {
            let e = set_loaded(&s, name).unwrap_err().to_string();
            assert!(
                e.contains(&format!("no TCP congestion control '{name}'")),
                "{e}"
            );
            assert!(e.contains("available: "), "{e}");
        }
        assert_eq!(std::fs::read_to_string(AVAILABLE).unwrap(), loaded);
        assert_eq!(of(&s).as_deref(), Some("reno"));
    }

    /// A socket reports its algorithm, takes one the kernel has, and refuses a name it has
    /// not, saying which it has.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_socket_uses_the_algorithm_asked_for() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let before = of(&s).expect("Linux names a TCP socket's algorithm");
        assert!(!before.is_empty());
        // reno is built into every Linux kernel.
        set(&s, "reno").unwrap();
        assert_eq!(of(&s).as_deref(), Some("reno"));
        let e = set(&s, "no_such_algo").unwrap_err().to_string();
        assert!(e.contains("'no_such_algo'"), "{e}");
        assert!(e.contains("reno"), "the error lists what there is: {e}");
        assert_eq!(
            of(&s).as_deref(),
            Some("reno"),
            "a refusal leaves it as it was"
        );
    }
}
