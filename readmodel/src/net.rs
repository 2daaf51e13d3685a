//! Which network addresses a server may send a request to when the URL comes from
//! outside (a webhook receiver an account chose, an OAuth client's metadata document):
//! only public unicast addresses. Never a private network, loopback, link-local (which
//! holds the cloud metadata service at 169.254.169.254), CGNAT, multicast, unspecified,
//! documentation or reserved address (the special-purpose ranges of IANA's registries
//! that are not globally reachable), nor an IPv6 address that embeds one of those
//! (IPv4-mapped `::ffff:a.b.c.d`, IPv4-translated `::ffff:0:a.b.c.d`, NAT64
//! `64:ff9b::/96` and `64:ff9b:1::/48`, 6to4 `2002::/16`) or a deprecated form that
//! could (IPv4-compatible `::a.b.c.d`, site-local `fec0::/10`, Teredo `2001::/32` and
//! the rest of the IETF protocol assignments `2001::/23`). Without this rule such a URL
//! could reach the service's own network (SSRF). The rule lives here, upstream of the
//! webhooks runtime and the MCP server, so that both apply the same one.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Whether a request may never go to `address` outside development, and why.
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
    // 192.0.2/24, 198.51.100/24 and 203.0.113/24.
    if address.is_documentation() {
        return Some("documentation address");
    }
    // The anycast of the 6to4 relays, deprecated (RFC 7526): whoever answers it is
    // nearest, not chosen.
    if first == 192 && second == 88 && third == 99 {
        return Some("6to4 relay anycast address");
    }
    if first == 198 && (second == 18 || second == 19) {
        return Some("benchmarking network");
    }
    if first >= 240 {
        return Some("reserved address");
    }
    None
}

/// The IPv4 address of two IPv6 segments.
fn v4_of(high: u16, low: u16) -> Ipv4Addr {
    Ipv4Addr::from((u32::from(high) << 16) | u32::from(low))
}

fn forbidden_v6(address: Ipv6Addr) -> Option<&'static str> {
    let segments = address.segments();
    let [.., high, low] = segments;
    // IPv4-mapped (`::ffff:0:0/96`), IPv4-translated (`::ffff:0:0:0/96`, RFC 2765) and
    // NAT64 (`64:ff9b::/96`) reach the IPv4 address in their last 32 bits.
    if matches!(segments[..6], [0, 0, 0, 0, 0, 0xffff] | [0, 0, 0, 0, 0xffff, 0] | [0x64, 0xff9b, 0, 0, 0, 0]) {
        return forbidden_v4(v4_of(high, low));
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
    // Deprecated forms that reach IPv4 or a local network: an IPv4-compatible address
    // (`::a.b.c.d`), site-local (`fec0::/10`) and Teredo (`2001::/32`, whose IPv4 is
    // obfuscated) are refused outright; 6to4 (`2002::/16`) carries its IPv4 in bits 16
    // to 48, held to the IPv4 rule.
    if segments[..6] == [0; 6] {
        return Some("IPv4-compatible address");
    }
    // Local-use NAT64 (`64:ff9b:1::/48`, RFC 8215) reaches IPv4 through a translator of
    // the local network, its IPv4 at a position the network chooses.
    if segments[..3] == [0x64, 0xff9b, 1] {
        return Some("local-use NAT64 address");
    }
    if segments[0] & 0xffc0 == 0xfec0 {
        return Some("site-local address");
    }
    if segments[0] == 0x2001 && segments[1] == 0 {
        return Some("Teredo address");
    }
    // The rest of the IETF protocol assignments (`2001::/23`): benchmarking, AMT, AS112,
    // ORCHID and the like, none a receiver's address.
    if segments[0] == 0x2001 && segments[1] < 0x200 {
        return Some("IETF protocol assignment");
    }
    if segments[0] == 0x2002 {
        return forbidden_v4(v4_of(segments[1], segments[2]));
    }
    // Documentation (`2001:db8::/32`) and discard-only (`100::/64`) prefixes.
    if (segments[0] == 0x2001 && segments[1] == 0x0db8) || segments[..4] == [0x100, 0, 0, 0] {
        return Some("reserved address");
    }
    None
}
