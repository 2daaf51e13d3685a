//! Which addresses a delivery may go to. Outside development a delivery goes only to
//! public unicast addresses: never to a private network, loopback, link-local (which
//! holds the cloud metadata service at 169.254.169.254), CGNAT, multicast, unspecified,
//! documentation or reserved address, nor to an IPv6 address that embeds one of those
//! (IPv4-mapped `::ffff:a.b.c.d`, IPv4-translated `::ffff:0:a.b.c.d`, NAT64
//! `64:ff9b::/96`, 6to4 `2002::/16`) or a deprecated form that could (IPv4-compatible,
//! site-local, Teredo and the other IETF protocol assignments of `2001::/23`). A receiver's URL is chosen by an account,
//! so without this rule a webhook could reach the service's own network (SSRF).
//!
//! The rule is `recap_readmodel::net`, where the MCP server's fetch of client metadata
//! documents applies it too; its cases are pinned here.

pub use recap_readmodel::net::forbidden;

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
            "192.0.0.8",
            "192.0.2.1",
            "198.51.100.7",
            "203.0.113.9",
            "192.88.99.1",
            "198.18.0.1",
            "198.19.255.255",
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "::ffff:169.254.169.254",
            "::ffff:0:7f00:1",
            "::ffff:0:a9fe:a9fe",
            "::ffff:0:10.1.2.3",
            "::ffff:0:c000:201",
            "64:ff9b::a9fe:a9fe",
            "::a9fe:a9fe",
            "64:ff9b:1::a9fe:a9fe",
            "64:ff9b:1:a9fe:a9:fe00::",
            "::10.0.0.1",
            "::8.8.8.8",
            "fec0::1",
            "feff::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2002:a9fe:a9fe::1",
            "2002:7f00:1::",
            "2002:0a00:0001::1",
            "2001:db8::1",
            "100::1",
            "2001:1::1",
            "2001:2::1",
            "2001:4:112::1",
            "2001:1ff:ffff::1",
            "2002:c058:6301::1",
            "2002:cb00:7101::1",
            "64:ff9b::c633:6407",
        ] {
            assert!(refused(address), "{address} is refused");
        }
    }

    #[test]
    fn an_ipv4_translated_address_is_held_to_the_rule_of_the_ipv4_address_it_embeds() {
        for (address, reason) in
            [("::ffff:0:7f00:1", "loopback"), ("::ffff:0:a9fe:a9fe", "link-local (metadata) address"), ("::ffff:0:c000:201", "documentation address")]
        {
            assert_eq!(forbidden(address.parse().unwrap()), Some(reason), "{address}");
        }
    }

    #[test]
    fn public_addresses_are_allowed() {
        for address in [
            "93.184.216.34",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "::ffff:0:808:808",
            "192.88.98.1",
            "203.0.114.1",
            "198.51.101.1",
            "2001:200::1",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "2001:4860:4860::8888",
        ] {
            assert!(!refused(address), "{address} is allowed");
        }
    }
}
