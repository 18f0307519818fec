//! Which IP addresses an outbound request may reach, and why the others are refused.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is not a public internet address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddressClass {
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// RFC 1918 (`10/8`, `172.16/12`, `192.168/16`) and IPv6 unique local (`fc00::/7`).
    Private,
    /// `169.254/16`, `fe80::/10`.
    LinkLocal,
    /// Carrier-grade NAT, RFC 6598 (`100.64/10`).
    SharedCgnat,
    /// Cloud instance metadata services (`169.254.169.254`, `169.254.170.2`, `fd00:ec2::254`,
    /// `100.100.100.200`): refused even when private networks are allowed.
    Metadata,
    /// `::ffff:a.b.c.d` and the deprecated `::a.b.c.d`: an IPv4 address in IPv6 clothing.
    Ipv4Mapped,
    /// `0.0.0.0/8`, `::` (Linux connects them to the local host).
    Unspecified,
    /// Multicast and broadcast.
    Multicast,
    /// Reserved, documentation, benchmarking and other non-routable ranges.
    Reserved,
}

impl AddressClass {
    /// Whether `allow_private_network` lifts the refusal. Metadata, IPv4-mapped, unspecified,
    /// multicast and reserved addresses stay refused: no test or deployment needs them.
    pub fn private_switch_allows(self) -> bool {
        matches!(
            self,
            Self::Loopback | Self::Private | Self::LinkLocal | Self::SharedCgnat
        )
    }

    /// The reason, as the refusal message words it.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Loopback => "a loopback address",
            Self::Private => "a private network address",
            Self::LinkLocal => "a link-local address",
            Self::SharedCgnat => "a carrier-grade NAT address (100.64.0.0/10)",
            Self::Metadata => "a cloud metadata service address",
            Self::Ipv4Mapped => "an IPv4-mapped IPv6 address",
            Self::Unspecified => "an unspecified address (0.0.0.0 or ::)",
            Self::Multicast => "a multicast or broadcast address",
            Self::Reserved => "a reserved, non-routable address",
        }
    }
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// The class of a non-public address; `None` for a public one.
pub fn classify(ip: IpAddr) -> Option<AddressClass> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<AddressClass> {
    let [a, b, c, d] = ip.octets();
    let class = match (a, b, c, d) {
        (169, 254, 169, 254) | (169, 254, 170, 2) | (100, 100, 100, 200) => AddressClass::Metadata,
        (0, ..) => AddressClass::Unspecified,
        (127, ..) => AddressClass::Loopback,
        (10, ..) | (192, 168, ..) => AddressClass::Private,
        (172, b, ..) if (16..=31).contains(&b) => AddressClass::Private,
        (169, 254, ..) => AddressClass::LinkLocal,
        (100, b, ..) if (64..=127).contains(&b) => AddressClass::SharedCgnat,
        (224..=239, ..) | (255, 255, 255, 255) => AddressClass::Multicast,
        // IETF protocol assignments, documentation (TEST-NET-1/2/3), benchmarking, 240/4.
        (192, 0, 0, _) | (192, 0, 2, _) | (198, 51, 100, _) | (203, 0, 113, _) => {
            AddressClass::Reserved
        }
        (198, 18 | 19, ..) | (240..=255, ..) => AddressClass::Reserved,
        _ => return None,
    };
    Some(class)
}

fn classify_v6(ip: Ipv6Addr) -> Option<AddressClass> {
    let s = ip.segments();
    if ip.is_unspecified() {
        return Some(AddressClass::Unspecified);
    }
    if ip.is_loopback() {
        return Some(AddressClass::Loopback);
    }
    if s[..5] == [0, 0, 0, 0, 0] && (s[5] == 0xffff || s[5] == 0) {
        // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible).
        return Some(AddressClass::Ipv4Mapped);
    }
    if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        return Some(AddressClass::Metadata);
    }
    // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an IPv4 address a gateway will reach.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let embedded = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
        return classify_v4(embedded);
    }
    if s[0] == 0x2002 {
        let embedded = Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
        return classify_v4(embedded);
    }
    let class = match s[0] {
        x if x & 0xfe00 == 0xfc00 => AddressClass::Private,
        x if x & 0xffc0 == 0xfe80 => AddressClass::LinkLocal,
        x if x & 0xff00 == 0xff00 => AddressClass::Multicast,
        // Documentation (2001:db8::/32) and the discard prefix (100::/64).
        0x2001 if s[1] == 0x0db8 => AddressClass::Reserved,
        0x0100 if s[1..4] == [0, 0, 0] => AddressClass::Reserved,
        _ => return None,
    };
    Some(class)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(s: &str) -> Option<AddressClass> {
        classify(s.parse().unwrap_or_else(|_| panic!("bad test address {s}")))
    }

    #[test]
    fn every_refused_class_is_recognised() {
        use AddressClass::*;
        let cases = [
            ("127.0.0.1", Some(Loopback)),
            ("127.255.0.9", Some(Loopback)),
            ("::1", Some(Loopback)),
            ("10.1.2.3", Some(Private)),
            ("172.16.0.1", Some(Private)),
            ("172.31.255.255", Some(Private)),
            ("192.168.1.1", Some(Private)),
            ("fd12:3456::1", Some(Private)),
            ("169.254.1.1", Some(LinkLocal)),
            ("fe80::1", Some(LinkLocal)),
            ("100.64.0.1", Some(SharedCgnat)),
            ("100.127.255.254", Some(SharedCgnat)),
            ("169.254.169.254", Some(Metadata)),
            ("169.254.170.2", Some(Metadata)),
            ("100.100.100.200", Some(Metadata)),
            ("fd00:ec2::254", Some(Metadata)),
            ("::ffff:8.8.8.8", Some(Ipv4Mapped)),
            ("::ffff:127.0.0.1", Some(Ipv4Mapped)),
            ("::127.0.0.1", Some(Ipv4Mapped)),
            ("0.0.0.0", Some(Unspecified)),
            ("::", Some(Unspecified)),
            ("224.0.0.1", Some(Multicast)),
            ("255.255.255.255", Some(Multicast)),
            ("ff02::1", Some(Multicast)),
            ("192.0.2.1", Some(Reserved)),
            ("198.18.0.1", Some(Reserved)),
            ("2001:db8::1", Some(Reserved)),
            ("64:ff9b::7f00:1", Some(Loopback)),
            ("64:ff9b::a00:1", Some(Private)),
            ("2002:c0a8:101::1", Some(Private)),
            ("8.8.8.8", None),
            ("172.32.0.1", None),
            ("100.63.255.255", None),
            ("100.128.0.1", None),
            ("2606:4700::1111", None),
            ("64:ff9b::808:808", None),
        ];
        for (addr, expected) in cases {
            assert_eq!(class(addr), expected, "{addr}");
        }
    }

    #[test]
    fn the_private_switch_never_opens_metadata_or_mapped_addresses() {
        assert!(AddressClass::Loopback.private_switch_allows());
        assert!(AddressClass::Private.private_switch_allows());
        assert!(!AddressClass::Metadata.private_switch_allows());
        assert!(!AddressClass::Ipv4Mapped.private_switch_allows());
        assert!(!AddressClass::Unspecified.private_switch_allows());
    }
}
