//! The guard against server-side request forgery: webhook URLs may only reach public
//! addresses, unless the host allows private ones
//! ([`Config::with_webhook_allow_private`](crate::Config::with_webhook_allow_private)).
//!
//! A URL is parsed once, the way the HTTP client parses it (WHATWG, the `url` crate), so the
//! host judged is the host dialled: `2130706433`, `0x7f.1`, `0177.0.0.01`, `127.0.0.1.` and
//! `127。0。0。1` are all `127.0.0.1` by then, and `LOCALHOST.` is `localhost.`.
//!
//! Refused unless private addresses are allowed: IPv4 "this network" (0/8), loopback,
//! private (RFC 1918), shared (CGNAT, RFC 6598), link-local, IETF protocol assignments,
//! documentation, benchmarking, the 6to4 relay anycast, multicast, reserved and broadcast; IPv6
//! outside global unicast (`2000::/3`: loopback, unspecified, unique-local, link-local,
//! site-local, multicast, IPv4-compatible, the local-use NAT64 prefix and every other reserved
//! block), the IETF protocol block `2001::/23` (Teredo included) and the documentation prefixes.
//! An IPv6 address that carries an IPv4 one (IPv4-mapped, NAT64 `64:ff9b::/96`, 6to4
//! `2002::/16`) is judged as that IPv4 address. Names `localhost` and `*.localhost`, in any
//! case and with trailing dots, are refused too.
//!
//! Refused always, private addresses allowed or not: unspecified, multicast, reserved and
//! broadcast addresses (nothing to send to; `0.0.0.0` reaches the host itself on Linux) and the
//! cloud metadata services (credentials live there), in every spelling above, including the
//! IPv4 address embedded in any IPv6 form (Teredo's server and client included).
//!
//! Registration checks the URL (`check_url`); every delivery checks it again, and the
//! delivery client checks every address it dials (`delivery.rs`): the resolver hands out only
//! allowed addresses and the connector refuses a connection whose peer is not allowed, so DNS
//! rebinding and rows stored before a rule changed are both covered.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

/// Longest webhook URL accepted.
pub(crate) const MAX_URL_CHARS: usize = 2048;

/// Why a webhook URL was refused: a field error's code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UrlRefusal {
    /// The field error code.
    pub(crate) code: &'static str,
    /// What the client is told.
    pub(crate) message: &'static str,
}

const NOT_ABSOLUTE: UrlRefusal = UrlRefusal {
    code: "invalid_url",
    message: "Must be an absolute http:// or https:// URL without credentials or fragment.",
};

const PRIVATE: UrlRefusal = UrlRefusal {
    code: "private_address",
    message: "Must not point at a loopback, private, link-local or otherwise non-public address.",
};

/// The host of a webhook URL, as the HTTP client will see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WebhookHost {
    /// A literal address, in whichever spelling the URL used.
    Ip(IpAddr),
    /// A name to resolve: lower case, IDNA-mapped, trailing dots kept.
    Name(String),
}

/// Parses an absolute http(s) URL without credentials or fragment, as the delivery client
/// parses it.
pub(crate) fn parse_url(text: &str) -> Result<Url, UrlRefusal> {
    let has_forbidden_char = text
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || c == '#' || c == '\\');
    if text.chars().count() > MAX_URL_CHARS || has_forbidden_char {
        return Err(NOT_ABSOLUTE);
    }
    // WHATWG parsing forgives `https:/host` and `https:///host`; a webhook URL is spelled out.
    let after_scheme = strip_prefix_ignoring_case(text, "https://")
        .or_else(|| strip_prefix_ignoring_case(text, "http://"))
        .ok_or(NOT_ABSOLUTE)?;
    let authority_end = after_scheme.find(['/', '?']).unwrap_or(after_scheme.len());
    let authority = &after_scheme[..authority_end];
    if authority.is_empty() || authority.contains('@') {
        return Err(NOT_ABSOLUTE);
    }
    let url = Url::parse(text).map_err(|_| NOT_ABSOLUTE)?;
    let shape_ok = matches!(url.scheme(), "http" | "https")
        && url.username().is_empty()
        && url.password().is_none()
        && url.fragment().is_none()
        && url.host().is_some();
    if shape_ok { Ok(url) } else { Err(NOT_ABSOLUTE) }
}

fn strip_prefix_ignoring_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// The host of a parsed URL.
pub(crate) fn host_of(url: &Url) -> Option<WebhookHost> {
    match url.host()? {
        Host::Ipv4(v4) => Some(WebhookHost::Ip(IpAddr::V4(v4))),
        Host::Ipv6(v6) => Some(WebhookHost::Ip(IpAddr::V6(v6))),
        Host::Domain(name) => Some(WebhookHost::Name(name.to_ascii_lowercase())),
    }
}

/// Checks a webhook URL (at registration, and again before each delivery): its shape, and
/// that its host may be reached. The URL as the delivery client will use it.
pub(crate) fn check_url(text: &str, allow_private: bool) -> Result<Url, UrlRefusal> {
    let url = parse_url(text)?;
    match host_of(&url).ok_or(NOT_ABSOLUTE)? {
        WebhookHost::Ip(ip) if !may_connect(ip, allow_private) => Err(PRIVATE),
        WebhookHost::Name(name) if !may_resolve(&name, allow_private) => Err(PRIVATE),
        _ => Ok(url),
    }
}

/// Whether a host name may be looked up at all: never a metadata service's name, and no
/// `localhost` name unless private addresses are allowed. What it resolves to is judged at
/// connect time.
pub(crate) fn may_resolve(name: &str, allow_private: bool) -> bool {
    let bare = name.trim_end_matches('.').to_ascii_lowercase();
    if METADATA_NAMES.contains(&bare.as_str()) {
        return false;
    }
    allow_private || !(bare == "localhost" || bare.ends_with(".localhost"))
}

/// Whether a request may be sent to `ip`: a public address always, any other unicast address
/// when `allow_private`; never an unspecified, multicast, reserved or broadcast address nor a
/// cloud metadata service, in any spelling.
pub(crate) fn may_connect(ip: IpAddr, allow_private: bool) -> bool {
    let never = match ip {
        IpAddr::V4(v4) => never_v4(v4),
        IpAddr::V6(v6) => {
            v6.is_unspecified()
                || v6.is_multicast()
                || METADATA_V6.contains(&v6)
                || embedded_v4(v6).into_iter().flatten().any(never_v4)
        }
    };
    !never && (allow_private || is_public(ip))
}

/// IPv4 addresses never dialled: nothing to send to, or a metadata service.
fn never_v4(ip: Ipv4Addr) -> bool {
    let [a, ..] = ip.octets();
    a == 0 || a >= 224 || METADATA_V4.contains(&ip)
}

/// Cloud metadata and platform services: instance credentials live behind them.
const METADATA_V4: [Ipv4Addr; 6] = [
    Ipv4Addr::new(169, 254, 169, 254), // AWS, GCP, Azure, Oracle, DigitalOcean, OpenStack
    Ipv4Addr::new(169, 254, 170, 2),   // AWS ECS task credentials
    Ipv4Addr::new(169, 254, 170, 23),  // AWS EKS pod identity
    Ipv4Addr::new(100, 100, 100, 200), // Alibaba Cloud
    Ipv4Addr::new(168, 63, 129, 16),   // Azure WireServer (a public address)
    Ipv4Addr::new(192, 0, 0, 192),     // Oracle Cloud (legacy)
];

/// IPv6 addresses of the metadata services.
const METADATA_V6: [Ipv6Addr; 3] = [
    Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254), // AWS (Nitro)
    Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0023), // AWS EKS pod identity
    Ipv6Addr::new(0xfd20, 0x00ce, 0, 0, 0, 0, 0, 0x0254), // GCP
];

/// Host names of the metadata services (they resolve to the addresses above).
const METADATA_NAMES: [&str; 2] = ["metadata.google.internal", "metadata.goog"];

/// Whether an address is publicly routable (see the module documentation for what is not).
pub(crate) fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

/// Non-public IPv4 blocks: (network, prefix length).
const REFUSED_V4: [(Ipv4Addr, u8); 15] = [
    (Ipv4Addr::new(0, 0, 0, 0), 8),       // "this network"
    (Ipv4Addr::new(10, 0, 0, 0), 8),      // private
    (Ipv4Addr::new(100, 64, 0, 0), 10),   // shared address space (CGNAT)
    (Ipv4Addr::new(127, 0, 0, 0), 8),     // loopback
    (Ipv4Addr::new(169, 254, 0, 0), 16),  // link-local (metadata services)
    (Ipv4Addr::new(172, 16, 0, 0), 12),   // private
    (Ipv4Addr::new(192, 0, 0, 0), 24),    // IETF protocol assignments
    (Ipv4Addr::new(192, 0, 2, 0), 24),    // documentation (TEST-NET-1)
    (Ipv4Addr::new(192, 88, 99, 0), 24),  // 6to4 relay anycast
    (Ipv4Addr::new(192, 168, 0, 0), 16),  // private
    (Ipv4Addr::new(198, 18, 0, 0), 15),   // benchmarking
    (Ipv4Addr::new(198, 51, 100, 0), 24), // documentation (TEST-NET-2)
    (Ipv4Addr::new(203, 0, 113, 0), 24),  // documentation (TEST-NET-3)
    (Ipv4Addr::new(224, 0, 0, 0), 4),     // multicast
    (Ipv4Addr::new(240, 0, 0, 0), 4),     // reserved, broadcast
];

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let address = u32::from(ip);
    let inside = |(network, length): &(Ipv4Addr, u8)| {
        let mask = u32::MAX.checked_shl(32 - u32::from(*length)).unwrap_or(0);
        address & mask == u32::from(*network)
    };
    !REFUSED_V4.iter().any(inside) && !METADATA_V4.contains(&ip)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    if let Some(mapped) = ip.to_ipv4_mapped() {
        return is_public_v4(mapped);
    }
    match s {
        // NAT64 well-known prefix (RFC 6052) and 6to4 (RFC 3056): the IPv4 address decides.
        [0x0064, 0xff9b, 0, 0, 0, 0, high, low] | [0x2002, high, low, ..] => {
            is_public_v4(v4_from(high, low))
        }
        _ => {
            let global_unicast = (s[0] & 0xe000) == 0x2000; // 2000::/3
            let protocol_assignments = (s[0] == 0x2001) && s[1] < 0x0200; // 2001::/23, Teredo
            let documentation = (s[0] == 0x2001 && s[1] == 0x0db8) // 2001:db8::/32
                || (s[0] == 0x3fff && s[1] < 0x1000); // 3fff::/20 (RFC 9637)
            global_unicast && !protocol_assignments && !documentation && !METADATA_V6.contains(&ip)
        }
    }
}

fn v4_from(high: u16, low: u16) -> Ipv4Addr {
    let [a, b] = high.to_be_bytes();
    let [c, d] = low.to_be_bytes();
    Ipv4Addr::new(a, b, c, d)
}

/// Every IPv4 address an IPv6 address may carry: IPv4-mapped (`::ffff:0:0/96`),
/// IPv4-translated (`::ffff:0:0:0/96`), IPv4-compatible (`::/96`, but not `::` or `::1`),
/// NAT64 (`64:ff9b::/96`, and the local-use `64:ff9b:1::/48` with the address in the last 32
/// bits), 6to4 (`2002::/16`), Teredo (`2001::/32`: the server, and the client inverted).
fn embedded_v4(ip: Ipv6Addr) -> [Option<Ipv4Addr>; 2] {
    match ip.segments() {
        [0, 0, 0, 0, 0, 0xffff, high, low]
        | [0, 0, 0, 0, 0xffff, 0, high, low]
        | [0x0064, 0xff9b, 0, 0, 0, 0, high, low]
        | [0x0064, 0xff9b, 0x0001, _, _, _, high, low]
        | [0x2002, high, low, ..] => [Some(v4_from(high, low)), None],
        [0, 0, 0, 0, 0, 0, high, low] if high != 0 => [Some(v4_from(high, low)), None],
        [0x2001, 0, server_high, server_low, _, _, high, low] => [
            Some(v4_from(server_high, server_low)),
            Some(v4_from(!high, !low)),
        ],
        _ => [None, None],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("address")
    }

    fn code(url: &str, allow_private: bool) -> Result<(), &'static str> {
        check_url(url, allow_private)
            .map(|_| ())
            .map_err(|refusal| refusal.code)
    }

    /// Every spelling of a non-public address, and what each is: refused without private
    /// addresses, and (last column) refused even with them.
    const NON_PUBLIC: &[(&str, &str, bool)] = &[
        ("0.0.0.0", "unspecified", true),
        ("0.1.2.3", "this network", true),
        ("127.0.0.1", "loopback", false),
        ("127.255.255.254", "loopback", false),
        ("10.0.0.1", "private", false),
        ("172.16.0.1", "private", false),
        ("172.31.255.255", "private", false),
        ("192.168.1.1", "private", false),
        ("169.254.0.1", "link-local", false),
        ("169.254.169.254", "metadata", true),
        ("169.254.170.2", "metadata (ECS)", true),
        ("169.254.170.23", "metadata (EKS)", true),
        ("100.100.100.200", "metadata (Alibaba)", true),
        ("168.63.129.16", "metadata (Azure WireServer)", true),
        ("192.0.0.192", "metadata (Oracle)", true),
        ("100.64.0.1", "CGNAT", false),
        ("100.127.255.255", "CGNAT", false),
        ("192.0.0.8", "IETF protocol assignments", false),
        ("192.0.2.1", "TEST-NET-1", false),
        ("192.88.99.1", "6to4 relay", false),
        ("198.18.0.1", "benchmarking", false),
        ("198.19.255.255", "benchmarking", false),
        ("198.51.100.7", "TEST-NET-2", false),
        ("203.0.113.9", "TEST-NET-3", false),
        ("224.0.0.1", "multicast", true),
        ("239.255.255.250", "multicast", true),
        ("240.0.0.1", "reserved", true),
        ("255.255.255.255", "broadcast", true),
        ("::", "unspecified", true),
        ("::1", "loopback", false),
        ("::ffff:127.0.0.1", "IPv4-mapped loopback", false),
        ("::ffff:10.1.2.3", "IPv4-mapped private", false),
        ("::ffff:0.0.0.0", "IPv4-mapped unspecified", true),
        ("::ffff:169.254.169.254", "IPv4-mapped metadata", true),
        ("::ffff:0:127.0.0.1", "IPv4-translated loopback", false),
        ("::ffff:0:a9fe:a9fe", "IPv4-translated metadata", true),
        ("::127.0.0.1", "IPv4-compatible loopback", false),
        ("::169.254.169.254", "IPv4-compatible metadata", true),
        ("::8.8.8.8", "IPv4-compatible (deprecated)", false),
        ("64:ff9b::7f00:1", "NAT64 loopback", false),
        ("64:ff9b::a9fe:a9fe", "NAT64 metadata", true),
        ("64:ff9b::6464:64c8", "NAT64 Alibaba metadata", true),
        ("64:ff9b:1::a9fe:a9fe", "local-use NAT64 metadata", true),
        ("64:ff9b:1::808:808", "local-use NAT64", false),
        ("2002:7f00:1::", "6to4 loopback", false),
        ("2002:c0a8:101::1", "6to4 private", false),
        ("2002:a9fe:a9fe::", "6to4 metadata", true),
        (
            "2001:0:4136:e378:8000:63bf:80ff:fffe",
            "Teredo, client 127.0.0.1",
            false,
        ),
        (
            "2001:0:4136:e378:8000:63bf:5601:5601",
            "Teredo, client metadata",
            true,
        ),
        ("2001:0:a9fe:a9fe::1", "Teredo, server metadata", true),
        (
            "2001:0:4136:e378:8000:63bf:f7f7:f7f7",
            "Teredo, public client",
            false,
        ),
        ("2001:2::1", "benchmarking", false),
        ("fc00::1", "unique local", false),
        ("fd12:3456:789a::1", "unique local", false),
        ("fd00:ec2::254", "metadata (AWS)", true),
        ("fd00:ec2::23", "metadata (EKS)", true),
        ("fd20:ce::254", "metadata (GCP)", true),
        ("fe80::1", "link-local", false),
        ("febf::1", "link-local", false),
        ("fec0::1", "site-local", false),
        ("ff02::1", "multicast", true),
        ("ff0e::1", "multicast", true),
        ("2001:db8::1", "documentation", false),
        ("3fff::1", "documentation", false),
        ("3fff:fff::1", "documentation", false),
        ("100::1", "discard-only", false),
        ("5f00::1", "SRv6 SIDs", false),
        ("4000::1", "reserved", false),
    ];

    #[test]
    fn non_public_addresses_are_refused_in_every_spelling() {
        for &(address, what, always) in NON_PUBLIC {
            assert!(!is_public(ip(address)), "{address} ({what}) is not public");
            assert!(!may_connect(ip(address), false), "{address} ({what})");
            assert_eq!(
                may_connect(ip(address), true),
                !always,
                "{address} ({what}) with private addresses allowed"
            );
        }
    }

    #[test]
    fn public_addresses_pass() {
        for public in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "100.63.255.255",
            "100.128.0.1",
            "169.253.255.255",
            "169.255.0.1",
            "172.15.255.255",
            "172.32.0.1",
            "192.0.1.1",
            "192.169.0.1",
            "198.17.255.255",
            "198.20.0.1",
            "223.255.255.255",
            "2606:4700:4700::1111",
            "2a00:1450:4001::200e",
            "2001:4860:4860::8888",
            "3fff:1000::1",
            "2001:200::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert!(is_public(ip(public)), "{public} is public");
            assert!(may_connect(ip(public), false), "{public}");
            assert!(may_connect(ip(public), true), "{public}");
        }
    }

    /// Spellings of loopback and metadata addresses in URLs, as they reach the host judge.
    const SPELLINGS: &[(&str, &str)] = &[
        ("http://127.0.0.1:9000/hook", "127.0.0.1"),
        ("http://2130706433:9000/hook", "127.0.0.1"),
        ("http://0x7f000001/hook", "127.0.0.1"),
        ("http://0X7F000001/hook", "127.0.0.1"),
        ("http://0x7f.0.0.1/hook", "127.0.0.1"),
        ("http://0x7f.0x0.0x0.0x1/hook", "127.0.0.1"),
        ("http://127.1/hook", "127.0.0.1"),
        ("http://127.0.1/hook", "127.0.0.1"),
        ("http://0177.0.0.1/hook", "127.0.0.1"),
        ("http://0177.0.0.01/hook", "127.0.0.1"),
        ("http://017700000001/hook", "127.0.0.1"),
        ("http://127.0.0.1./hook", "127.0.0.1"),
        ("http://127.1./hook", "127.0.0.1"),
        ("http://127%2e0%2e0%2e1/hook", "127.0.0.1"),
        ("http://127\u{3002}0\u{3002}0\u{3002}1/hook", "127.0.0.1"),
        ("http://\u{ff11}\u{ff12}\u{ff17}.0.0.1/hook", "127.0.0.1"),
        ("http://0/hook", "0.0.0.0"),
        ("http://0.0.0.0/hook", "0.0.0.0"),
        ("http://0x0/hook", "0.0.0.0"),
        ("http://2852039166/latest/meta-data", "169.254.169.254"),
        ("http://0xa9fea9fe/latest/meta-data", "169.254.169.254"),
        ("http://0xa9.0xfe.0xa9.0xfe/latest", "169.254.169.254"),
        ("http://0251.0376.0251.0376/latest", "169.254.169.254"),
        ("http://169.254.43518/latest", "169.254.169.254"),
        ("http://169.16689662/latest", "169.254.169.254"),
        ("http://169.254.169.254./latest", "169.254.169.254"),
        ("http://1684300999/", "100.100.100.199"),
        ("http://1684301000/", "100.100.100.200"),
        ("http://[::1]:9000/hook", "::1"),
        ("http://[0:0:0:0:0:0:0:1]/hook", "::1"),
        ("http://[::ffff:127.0.0.1]/hook", "::ffff:127.0.0.1"),
        ("http://[::ffff:7f00:1]/hook", "::ffff:127.0.0.1"),
        ("http://[::127.0.0.1]/hook", "::127.0.0.1"),
        ("http://[64:ff9b::127.0.0.1]/hook", "64:ff9b::7f00:1"),
        ("http://[2002:7f00:1::1]/hook", "2002:7f00:1::1"),
        ("http://[::ffff:169.254.169.254]/latest", "::ffff:a9fe:a9fe"),
        (
            "http://[64:ff9b::169.254.169.254]/latest",
            "64:ff9b::a9fe:a9fe",
        ),
        ("http://[2002:a9fe:a9fe::]/latest", "2002:a9fe:a9fe::"),
        ("http://[fd00:ec2::254]/latest", "fd00:ec2::254"),
        ("http://[FD00:0EC2:0:0:0:0:0:0254]/latest", "fd00:ec2::254"),
    ];

    #[test]
    fn every_spelling_of_an_address_is_judged_as_that_address() {
        for &(url, address) in SPELLINGS {
            let parsed = parse_url(url).unwrap_or_else(|refusal| panic!("{url}: {refusal:?}"));
            assert_eq!(
                host_of(&parsed),
                Some(WebhookHost::Ip(ip(address))),
                "{url}"
            );
        }
    }

    #[test]
    fn registration_refuses_loopback_and_metadata_in_every_spelling() {
        for &(url, address) in SPELLINGS {
            let public = is_public(ip(address));
            let expected = if public {
                Ok(())
            } else {
                Err("private_address")
            };
            assert_eq!(code(url, false), expected, "{url}");
        }
        for url in [
            "http://2852039166/latest/meta-data",
            "http://0xa9fea9fe/latest",
            "http://169.254.169.254./latest",
            "http://[::ffff:169.254.169.254]/latest",
            "http://[fd00:ec2::254]/latest",
            "http://1684301000/",
            "http://0/hook",
            "http://metadata.google.internal/computeMetadata/v1/",
            "http://METADATA.Google.Internal./computeMetadata/v1/",
        ] {
            assert_eq!(
                code(url, true),
                Err("private_address"),
                "{url} with private addresses allowed"
            );
        }
        for url in [
            "http://2130706433:9000/hook",
            "http://127.1/hook",
            "http://[::1]/hook",
            "http://10.0.0.1/hook",
            "http://localhost:9000/hook",
        ] {
            assert_eq!(
                code(url, true),
                Ok(()),
                "{url} with private addresses allowed"
            );
        }
    }

    #[test]
    fn localhost_names_are_refused_in_any_case_and_with_trailing_dots() {
        for url in [
            "http://localhost/hook",
            "http://LOCALHOST/hook",
            "http://LocalHost:8080/hook",
            "http://localhost./hook",
            "http://localhost../hook",
            "http://api.localhost/hook",
            "http://api.LOCALHOST./hook",
            "http://a.b.localhost/hook",
            "http://localhost%2e/hook",
            "http://%6cocalhost/hook",
            "http://\u{ff4c}\u{ff4f}\u{ff43}\u{ff41}\u{ff4c}\u{ff48}\u{ff4f}\u{ff53}\u{ff54}/hook",
        ] {
            assert_eq!(code(url, false), Err("private_address"), "{url}");
        }
        for name in [
            "localhost.example.com",
            "notlocalhost",
            "localhost-api.example.com",
        ] {
            assert_eq!(
                code(&format!("https://{name}/hook"), false),
                Ok(()),
                "{name}"
            );
        }
    }

    #[test]
    fn ordinary_urls_pass() {
        for good in [
            "https://hooks.example.com/aggregation",
            "HTTPS://Hooks.Example.com/aggregation",
            "http://hooks.example.com:8080/x?y=1",
            "https://hooks.example.com./x",
            "https://93.184.216.34/hook",
            "https://1572395042/hook",
            "https://[2606:4700:4700::1111]/hook",
            "https://b\u{fc}cher.example/hook",
            "https://127.0.0.1.nip.io/hook",
            "https://0x7f.example.com/hook",
        ] {
            assert_eq!(code(good, false), Ok(()), "{good}");
        }
        assert_eq!(
            host_of(&parse_url("https://Hooks.Example.com/x").expect("url")),
            Some(WebhookHost::Name("hooks.example.com".to_owned()))
        );
        assert_eq!(
            host_of(&parse_url("https://b\u{fc}cher.example/x").expect("url")),
            Some(WebhookHost::Name("xn--bcher-kva.example".to_owned()))
        );
    }

    #[test]
    fn malformed_urls_are_invalid() {
        for bad in [
            "/relative",
            "hooks.example.com/x",
            "ftp://example.com/x",
            "file:///etc/passwd",
            "https://user:pass@example.com/x",
            "https://user@example.com/x",
            "https://@example.com/x",
            "https://example.com/x#fragment",
            "https://example.com/x#",
            "https:///x",
            "https:/example.com/x",
            "https:example.com/x",
            "https://",
            "https://:80/",
            "https://exa mple.com/",
            "https://example.com/\n",
            "http:\\\\127.0.0.1\\hook",
            "http://127.0.0.1\\@example.com/",
            "https://[::1/",
            "https://[fe80::1%25eth0]/",
            "http://256.0.0.1/",
            "http://0x100000000/",
            "http://1.2.3.4.5/",
        ] {
            assert_eq!(code(bad, false), Err("invalid_url"), "{bad}");
            assert_eq!(code(bad, true), Err("invalid_url"), "{bad}");
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_CHARS));
        assert_eq!(code(&long, true), Err("invalid_url"));
    }
}
