//! Which addresses a delivery may go to. Outside development a delivery goes only to
//! public unicast addresses: never to a private network, loopback, link-local (which
//! holds the cloud metadata service at 169.254.169.254), CGNAT, multicast, unspecified
//! or reserved address, nor to an IPv6 address that embeds one of those (IPv4-mapped
//! `::ffff:a.b.c.d`, NAT64 `64:ff9b::/96`). A receiver's URL is chosen by an account,
//! so without this rule a webhook could reach the service's own network (SSRF).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Whether a delivery may never go to `address` outside development, and why.
pub fn forbidden(address: IpAddr) -> Option<&'static str> {
    match address {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(address: Ipv4Addr) -> Option<&'static str> {
    let [first, second, third, _] = address.octets();
    if address.is_loopback() {
        return Some("loopback");
    }
    if address.is_private() {
        return Some("private network");
    }
    if address.is_link_local() {
        return Some("link-local (metadata) address");
    }
    if address.is_unspecified() || first == 0 {
        return Some("unspecified address");
    }
    if address.is_multicast() || address.is_broadcast() {
        return Some("multicast or broadcast address");
    }
    if first == 100 && (64..128).contains(&second) {
        return Some("shared address space (CGNAT)");
    }
    if first == 192 && second == 0 && third == 0 {
        return Some("IETF protocol assignment");
    }
    if first == 198 && (second == 18 || second == 19) {
        return Some("benchmarking network");
    }
    if first >= 240 {
        return Some("reserved address");
    }
    None
}

fn forbidden_v6(address: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = address.to_ipv4_mapped() {
        return forbidden_v4(v4);
    }
    let segments = address.segments();
    // NAT64 (64:ff9b::/96) reaches the IPv4 address in its last 32 bits.
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let [.., high, low] = segments;
        return forbidden_v4(Ipv4Addr::from((u32::from(high) << 16) | u32::from(low)));
    }
    if address.is_loopback() {
        return Some("loopback");
    }
    if address.is_unspecified() {
        return Some("unspecified address");
    }
    if address.is_multicast() {
        return Some("multicast address");
    }
    if segments[0] & 0xfe00 == 0xfc00 {
        return Some("unique local address");
    }
    if segments[0] & 0xffc0 == 0xfe80 {
        return Some("link-local address");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> bool {
        forbidden(text.parse().unwrap()).is_some()
    }

    #[test]
    fn private_loopback_link_local_metadata_and_cgnat_addresses_are_refused() {
        for address in [
            "127.0.0.1",
            "127.8.9.10",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "169.254.0.1",
            "100.64.0.1",
            "100.127.255.255",
            "0.0.0.0",
            "0.1.2.3",
            "224.0.0.1",
            "255.255.255.255",
            "240.0.0.1",
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
        ] {
            assert!(refused(address), "{address} is refused");
        }
    }

    #[test]
    fn public_addresses_are_allowed() {
        for address in ["93.184.216.34", "8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"] {
            assert!(!refused(address), "{address} is allowed");
        }
    }
}
