//! The machine a program runs on, as the verdict needs it: whether two ends share one kernel
//! (its boot id) and how fast the interface a connection leaves by is said to be.

use std::net::IpAddr;
use std::sync::OnceLock;

/// This kernel's boot id (`/proc/sys/kernel/random/boot_id`, a random UUID chosen at boot), as
/// 16 bytes; `None` where there is none. Two programs that read the same id run on one machine
/// (network namespaces and containers included): they share its CPUs.
pub fn boot_id() -> Option<[u8; 16]> {
    static ID: OnceLock<Option<[u8; 16]>> = OnceLock::new();
    *ID.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        parse_uuid(&text)
    })
}

/// Both ends of a connection run on this machine: the peer's address is a loopback one, or the
/// peer's kernel boot id (`peer_boot_id`, as it reported it) is ours.
pub fn same_host(peer: std::net::IpAddr, peer_boot_id: Option<[u8; 16]>) -> bool {
    peer.is_loopback() || peer_boot_id.is_some_and(|id| Some(id) == boot_id())
}

/// The 16 bytes of a UUID written as 32 hex digits with or without dashes.
pub fn parse_uuid(text: &str) -> Option<[u8; 16]> {
    let hex: Vec<u8> = text.trim().bytes().filter(|b| *b != b'-').collect();
    if hex.len() != 32 {
        return None;
    }
    let mut id = [0u8; 16];
    for (slot, pair) in id.iter_mut().zip(hex.chunks(2)) {
        *slot = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    (id != [0; 16]).then_some(id)
}

/// The CPUs this process may run on (its affinity mask), whatever share of them a CPU quota
/// grants: the machine's CPUs that both ends of a loopback transfer share. 0 where not known.
pub fn cpus() -> u32 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: an all-zero cpu_set_t is a valid (empty) set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: sched_getaffinity writes at most size_of::<cpu_set_t>() bytes into `set`.
        let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
        if rc == 0 {
            // SAFETY: `set` was filled by the kernel.
            return unsafe { libc::CPU_COUNT(&set) } as u32;
        }
    }
    std::thread::available_parallelism().map_or(0, |n| n.get() as u32)
}

/// The interface that holds the local address `local`, and the speed its driver gives
/// (`/sys/class/net/IF/speed`, Mbit/s). `None` for the speed where the driver says none
/// (loopback, a down link, `-1`).
pub fn interface_of(local: IpAddr) -> Option<(String, Option<u64>)> {
    let name = interface_name(local)?;
    let speed = std::fs::read_to_string(format!("/sys/class/net/{name}/speed"))
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .filter(|mbit| *mbit > 0)
        .map(|mbit| mbit as u64);
    Some((name, speed))
}

#[cfg(target_os = "linux")]
fn interface_name(local: IpAddr) -> Option<String> {
    use std::ffi::CStr;
    let local = match local {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a linked list we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return None;
    }
    let mut found = None;
    let mut at = list;
    while !at.is_null() {
        // SAFETY: `at` is a node of the list getifaddrs returned, live until freeifaddrs.
        let node = unsafe { &*at };
        at = node.ifa_next;
        if node.ifa_addr.is_null() || node.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_addr points at a sockaddr of the family it names.
        let addr = unsafe { sockaddr_ip(node.ifa_addr) };
        if addr == Some(local) {
            // SAFETY: ifa_name is a NUL-terminated string owned by the list.
            let name = unsafe { CStr::from_ptr(node.ifa_name) };
            found = Some(name.to_string_lossy().into_owned());
            break;
        }
    }
    // SAFETY: `list` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(list) };
    found
}

/// The IP address in a `sockaddr_in` or `sockaddr_in6`.
///
/// # Safety
/// `sa` must point at a live sockaddr of the length its family implies.
#[cfg(target_os = "linux")]
unsafe fn sockaddr_ip(sa: *const libc::sockaddr) -> Option<IpAddr> {
    // SAFETY: the caller guarantees `sa` is live; the family says which struct it is.
    unsafe {
        match i32::from((*sa).sa_family) {
            libc::AF_INET => {
                let v4 = &*(sa as *const libc::sockaddr_in);
                Some(IpAddr::from(u32::from_be(v4.sin_addr.s_addr).to_be_bytes()))
            }
            libc::AF_INET6 => {
                let v6 = &*(sa as *const libc::sockaddr_in6);
                Some(IpAddr::from(v6.sin6_addr.s6_addr))
            }
            _ => None,
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn interface_name(_local: IpAddr) -> Option<String> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_parse_with_or_without_dashes() {
        let id = parse_uuid("0f8d6c1e-54a2-4b1b-9f3e-2c4d5e6f7a8b\n").unwrap();
        assert_eq!(id[0], 0x0f);
        assert_eq!(id[15], 0x8b);
        assert_eq!(parse_uuid("0f8d6c1e54a24b1b9f3e2c4d5e6f7a8b"), Some(id));
        assert_eq!(parse_uuid("0f8d"), None);
        assert_eq!(parse_uuid("zz8d6c1e54a24b1b9f3e2c4d5e6f7a8b"), None);
        assert_eq!(parse_uuid(&"0".repeat(32)), None, "all zero is no id");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn this_machine_has_a_boot_id_and_a_loopback() {
        assert!(boot_id().is_some());
        assert!(cpus() >= 1);
        let (name, speed) = interface_of("127.0.0.1".parse().unwrap()).expect("lo");
        assert_eq!(name, "lo");
        assert_eq!(speed, None, "loopback has no line rate");
        assert_eq!(
            interface_of("::ffff:127.0.0.1".parse().unwrap()).unwrap().0,
            "lo"
        );
    }
}
