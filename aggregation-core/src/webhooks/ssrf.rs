//! The guard against server-side request forgery: webhook URLs may only reach public
//! addresses, unless the host allows private ones
//! ([`Config::with_webhook_allow_private`](crate::Config::with_webhook_allow_private)).
//!
//! Refused: unspecified, loopback, private (RFC 1918), shared (CGNAT, RFC 6598), link-local,
//! benchmarking, documentation, reserved, broadcast and multicast IPv4 addresses; for IPv6 the
//! unspecified and loopback addresses, unique-local, link-local and site-local ranges,
//! multicast, documentation and discard-only prefixes, and every IPv4 address embedded in an
//! IPv6 one (mapped, compatible, NAT64, 6to4, Teredo) judged as that IPv4 address.
//!
//! The URL is checked at registration (scheme, no credentials, and a literal address or a
//! `localhost` name refused there already); every delivery then resolves the host itself and
//! connects only to the addresses that passed (see `delivery.rs`), so a name that resolves to
//! a private address, or starts to (DNS rebinding), never receives a request.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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

/// The host of a webhook URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WebhookHost {
    /// A literal address.
    Ip(IpAddr),
    /// A name to resolve.
    Name(String),
}

/// The host of an absolute http(s) URL without credentials or fragment.
pub(crate) fn webhook_host(url: &str) -> Result<WebhookHost, UrlRefusal> {
    if url.chars().count() > MAX_URL_CHARS
        || url
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '#')
    {
        return Err(NOT_ABSOLUTE);
    }
    let uri: http::Uri = url.parse().map_err(|_| NOT_ABSOLUTE)?;
    let scheme_ok = matches!(uri.scheme_str(), Some("http" | "https"));
    let authority = uri.authority().ok_or(NOT_ABSOLUTE)?;
    if !scheme_ok || authority.as_str().contains('@') {
        return Err(NOT_ABSOLUTE);
    }
    let host = authority.host();
    let bracketed = host
        .strip_prefix('[')
        .and_then(|inner| inner.strip_suffix(']'));
    if let Some(inner) = bracketed {
        return inner
            .parse::<Ipv6Addr>()
            .map(|ip| WebhookHost::Ip(IpAddr::V6(ip)))
            .map_err(|_| NOT_ABSOLUTE);
    }
    if host.is_empty() {
        return Err(NOT_ABSOLUTE);
    }
    match host.parse::<Ipv4Addr>() {
        Ok(ip) => Ok(WebhookHost::Ip(IpAddr::V4(ip))),
        Err(_) => Ok(WebhookHost::Name(host.to_ascii_lowercase())),
    }
}

/// Checks a webhook URL at registration: absolute http(s), no credentials or fragment, and
/// (unless `allow_private`) neither a non-public literal address nor a `localhost` name.
pub(crate) fn check_url(url: &str, allow_private: bool) -> Result<(), UrlRefusal> {
    let host = webhook_host(url)?;
    if allow_private {
        return Ok(());
    }
    match host {
        WebhookHost::Ip(ip) if !is_public(ip) => Err(PRIVATE),
        WebhookHost::Name(name)
            if name == "localhost"
                || name.ends_with(".localhost")
                || name.trim_end_matches('.') == "localhost" =>
        {
            Err(PRIVATE)
        }
        _ => Ok(()),
    }
}

/// Whether a request may be sent to `ip`: always for a public address, and for any other
/// unicast address when `allow_private`. Unspecified and multicast addresses never.
#[cfg(any(feature = "webhooks", test))]
pub(crate) fn may_connect(ip: IpAddr, allow_private: bool) -> bool {
    let never = match ip {
        IpAddr::V4(v4) => v4.is_unspecified() || v4.is_multicast() || v4.is_broadcast(),
        IpAddr::V6(v6) => v6.is_unspecified() || v6.is_multicast(),
    };
    !never && (allow_private || is_public(ip))
}

/// Whether an address is publicly routable (see the module documentation for what is not).
pub(crate) fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let refused = a == 0 // "this network", 0.0.0.0/8
        || a == 10
        || a == 127
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT), 100.64.0.0/10
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments, 192.0.0.0/24
        || (a == 192 && b == 0 && c == 2) // TEST-NET-1
        || (a == 192 && b == 88 && c == 99) // 6to4 relay anycast
        || (a == 192 && b == 168)
        || (a == 198 && (b == 18 || b == 19)) // benchmarking, 198.18.0.0/15
        || (a == 198 && b == 51 && c == 100) // TEST-NET-2
        || (a == 203 && b == 0 && c == 113) // TEST-NET-3
        || a >= 224; // multicast, reserved and broadcast
    !refused
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let segments = ip.segments();
    if let Some(v4) = embedded_v4(ip) {
        return is_public_v4(v4);
    }
    let refused = ip.is_unspecified()
        || ip.is_loopback()
        || (segments[0] & 0xfe00) == 0xfc00 // unique local, fc00::/7
        || (segments[0] & 0xffc0) == 0xfe80 // link-local, fe80::/10
        || (segments[0] & 0xffc0) == 0xfec0 // site-local (deprecated), fec0::/10
        || (segments[0] & 0xff00) == 0xff00 // multicast
        || (segments[0] == 0x2001 && segments[1] == 0x0db8) // documentation
        || (segments[0] == 0x0100 && segments[1..4] == [0, 0, 0]) // discard-only, 100::/64
        || segments[0] == 0; // the rest of ::/16 (IPv4-compatible and reserved)
    !refused
}

/// The IPv4 address inside an IPv4-mapped (`::ffff:a.b.c.d`), NAT64 (`64:ff9b::/96`), 6to4
/// (`2002::/16`) or Teredo (`2001::/32`, the client address inverted) address.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let from = |high: u16, low: u16| {
        let [a, b] = high.to_be_bytes();
        let [c, d] = low.to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    };
    if let Some(mapped) = ip.to_ipv4_mapped() {
        return Some(mapped);
    }
    match s {
        [0x0064, 0xff9b, 0, 0, 0, 0, high, low] => Some(from(high, low)),
        [0x2002, high, low, ..] => Some(from(high, low)),
        [0x2001, 0, _, _, _, _, high, low] => Some(from(!high, !low)),
        // IPv4-compatible (deprecated) ::a.b.c.d, but not :: and ::1.
        [0, 0, 0, 0, 0, 0, high, low] if high != 0 => Some(from(high, low)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("address")
    }

    #[test]
    fn non_public_addresses_are_recognized() {
        for refused in [
            "0.0.0.0",
            "0.1.2.3",
            "127.0.0.1",
            "127.255.255.254",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "198.18.0.1",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
            "2002:c0a8:101::1",
            "fc00::1",
            "fd12:3456:789a::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
            "2001:db8::1",
            "100::1",
        ] {
            assert!(!is_public(ip(refused)), "{refused} must be refused");
            assert!(!may_connect(ip(refused), false), "{refused}");
        }
        for public in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.255.255",
            "172.32.0.1",
            "192.169.0.1",
            "198.20.0.1",
            "2606:4700:4700::1111",
            "2a00:1450:4001::200e",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert!(is_public(ip(public)), "{public} is public");
            assert!(may_connect(ip(public), false), "{public}");
        }
    }

    #[test]
    fn allowing_private_addresses_still_refuses_unspecified_and_multicast() {
        assert!(may_connect(ip("127.0.0.1"), true));
        assert!(may_connect(ip("::1"), true));
        assert!(may_connect(ip("10.0.0.1"), true));
        assert!(!may_connect(ip("0.0.0.0"), true));
        assert!(!may_connect(ip("::"), true));
        assert!(!may_connect(ip("224.0.0.1"), true));
        assert!(!may_connect(ip("ff02::1"), true));
    }

    #[test]
    fn registration_checks_the_url_shape_and_literal_hosts() {
        for good in [
            "https://hooks.example.com/aggregation",
            "http://hooks.example.com:8080/x?y=1",
            "https://93.184.216.34/hook",
            "https://[2606:4700:4700::1111]/hook",
        ] {
            assert_eq!(check_url(good, false), Ok(()), "{good}");
        }
        for (bad, code) in [
            ("/relative", "invalid_url"),
            ("ftp://example.com/x", "invalid_url"),
            ("https://user:pass@example.com/x", "invalid_url"),
            ("https://example.com/x#fragment", "invalid_url"),
            ("https:///x", "invalid_url"),
            ("https://exa mple.com/", "invalid_url"),
            ("https://[::1/", "invalid_url"),
            ("http://127.0.0.1:9000/hook", "private_address"),
            ("http://[::1]/hook", "private_address"),
            ("http://[::ffff:7f00:1]/hook", "private_address"),
            ("http://169.254.169.254/latest/meta-data", "private_address"),
            ("http://localhost:8080/hook", "private_address"),
            ("http://api.LOCALHOST/hook", "private_address"),
        ] {
            assert_eq!(
                check_url(bad, false).map_err(|r| r.code),
                Err(code),
                "{bad}"
            );
        }
        let long = format!("https://example.com/{}", "a".repeat(MAX_URL_CHARS));
        assert!(check_url(&long, true).is_err());
        assert_eq!(check_url("http://127.0.0.1:9000/hook", true), Ok(()));
        assert_eq!(check_url("http://localhost/hook", true), Ok(()));
        assert_eq!(
            webhook_host("http://[::1]:8080/x"),
            Ok(WebhookHost::Ip(ip("::1")))
        );
        assert_eq!(
            webhook_host("https://Hooks.Example.com/x"),
            Ok(WebhookHost::Name("hooks.example.com".to_owned()))
        );
    }
}
