//! Client IP resolution behind trusted proxies, and the parser of their CIDR list.
//!
//! The client is the peer address. Only when the peer is a configured trusted proxy
//! (`AGG_TRUSTED_PROXIES`) is `X-Forwarded-For` read, from the right, skipping trusted
//! proxies; the first other address is the client. An entry that is not an address stops the
//! walk and the last trusted hop is the client (it is the last address we can vouch for).
//! Without trusted proxies, `X-Forwarded-For` is ignored, so a client cannot pick its own
//! bucket by sending the header.
//!
//! IPv4-mapped IPv6 addresses (`::ffff:10.0.0.1`, as a dual-stack listener reports IPv4
//! peers) are treated as the IPv4 address they carry, both for matching and in the result.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use ipnet::IpNet;

/// A malformed CIDR.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CidrError {
    /// The entry is not `address` or `address/prefix`.
    #[error("invalid CIDR `{entry}`: {reason}")]
    Invalid {
        /// The entry as written.
        entry: String,
        /// What is wrong.
        reason: &'static str,
    },
}

/// Parse `10.0.0.0/8`, `2001:db8::/32`, or a bare address (a single host: `/32` or `/128`)
/// into its network; surrounding whitespace is ignored and the host bits are cleared
/// (`10.1.2.3/8` is `10.0.0.0/8`). The prefix length is decimal digits only.
///
/// # Errors
/// [`CidrError::Invalid`] naming the entry.
pub fn parse_cidr(entry: &str) -> Result<IpNet, CidrError> {
    let invalid = |reason| CidrError::Invalid {
        entry: entry.to_owned(),
        reason,
    };
    let text = entry.trim();
    if text.is_empty() {
        return Err(invalid("empty entry"));
    }
    let (addr_text, prefix_text) = match text.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (text, None),
    };
    let addr = IpAddr::from_str(addr_text).map_err(|_| invalid("not an IP address"))?;
    let prefix_len = match prefix_text {
        None => IpNet::from(addr).prefix_len(),
        Some(p) => {
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid("prefix length is not a number"));
            }
            p.parse().map_err(|_| invalid("prefix length too large"))?
        }
    };
    IpNet::new(addr, prefix_len)
        .map(|net| net.trunc())
        .map_err(|_| invalid("prefix length too large"))
}

/// Parse a comma-separated list (`AGG_TRUSTED_PROXIES`) with [`parse_cidr`]. A blank string is
/// an empty list; an empty entry inside the list (`a,,b`) is an error.
///
/// # Errors
/// [`CidrError::Invalid`] naming the first bad entry.
pub fn parse_cidr_list(list: &str) -> Result<Vec<IpNet>, CidrError> {
    if list.trim().is_empty() {
        return Ok(Vec::new());
    }
    list.split(',').map(parse_cidr).collect()
}

/// Whether `addr` is inside `net`; an IPv4-mapped IPv6 address matches IPv4 networks.
fn net_contains(net: &IpNet, addr: IpAddr) -> bool {
    net.contains(&addr.to_canonical())
}

fn is_trusted(addr: IpAddr, trusted: &[IpNet]) -> bool {
    trusted.iter().any(|net| net_contains(net, addr))
}

/// Parse one `X-Forwarded-For` entry: an address, optionally with a port
/// (`203.0.113.9:4711`, `[2001:db8::1]:443`) or in brackets (`[2001:db8::1]`).
fn parse_forwarded_entry(entry: &str) -> Option<IpAddr> {
    let entry = entry.trim();
    if let Ok(ip) = IpAddr::from_str(entry) {
        return Some(ip);
    }
    if let Ok(sock) = SocketAddr::from_str(entry) {
        return Some(sock.ip());
    }
    entry
        .strip_prefix('[')
        .and_then(|e| e.strip_suffix(']'))
        .and_then(|e| Ipv6Addr::from_str(e).ok())
        .map(IpAddr::V6)
}

/// The client address of a request.
///
/// `peer` is the TCP peer (`None` when unknown, e.g. a Unix socket or an in-process call:
/// then the result is `None`, whatever the headers say). `x_forwarded_for` holds every
/// `X-Forwarded-For` header value in the order received; each may list several
/// comma-separated addresses. `trusted` are the proxies whose header is believed.
pub(crate) fn client_ip(
    peer: Option<IpAddr>,
    x_forwarded_for: &[&str],
    trusted: &[IpNet],
) -> Option<IpAddr> {
    let peer = peer?.to_canonical();
    if !is_trusted(peer, trusted) {
        return Some(peer);
    }
    let mut last_trusted = peer;
    let entries = x_forwarded_for
        .iter()
        .rev()
        .flat_map(|value| value.rsplit(','));
    for entry in entries {
        let Some(addr) = parse_forwarded_entry(entry) else {
            // Garbage (or an empty entry): nothing to the left of it can be vouched for.
            return Some(last_trusted);
        };
        let addr = addr.to_canonical();
        if is_trusted(addr, trusted) {
            last_trusted = addr;
        } else {
            return Some(addr);
        }
    }
    // Every hop is a trusted proxy: the leftmost one is the client as far as we can tell.
    Some(last_trusted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_example_holds() {
        use std::net::IpAddr;

        let trusted = parse_cidr_list("10.0.0.0/8, fd00::/8").unwrap();
        let proxy: IpAddr = "10.0.0.5".parse().unwrap();
        let xff = ["198.51.100.7, 203.0.113.9, 10.0.0.2"];
        // 10.0.0.2 is a trusted proxy, 203.0.113.9 is the first other address from the right.
        assert_eq!(
            client_ip(Some(proxy), &xff, &trusted),
            Some("203.0.113.9".parse().unwrap())
        );
        // The same header from an untrusted peer is ignored.
        let peer: IpAddr = "192.0.2.1".parse().unwrap();
        assert_eq!(client_ip(Some(peer), &xff, &trusted), Some(peer));
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn cidr_parsing() {
        let c = parse_cidr("10.0.0.0/8").unwrap();
        assert!(net_contains(&c, ip("10.255.1.2")));
        assert!(!net_contains(&c, ip("11.0.0.1")));
        assert!(net_contains(&c, ip("::ffff:10.1.2.3")));
        assert_eq!(c.to_string(), "10.0.0.0/8");
        assert_eq!(parse_cidr(" 10.1.2.3/8 ").unwrap(), c);

        let host = parse_cidr("192.0.2.1").unwrap();
        assert_eq!(host.prefix_len(), 32);
        assert!(net_contains(&host, ip("192.0.2.1")));
        assert!(!net_contains(&host, ip("192.0.2.2")));

        let all4 = parse_cidr("0.0.0.0/0").unwrap();
        assert!(net_contains(&all4, ip("203.0.113.1")));
        assert!(!net_contains(&all4, ip("2001:db8::1")));

        let v6 = parse_cidr("2001:db8::/32").unwrap();
        assert!(net_contains(&v6, ip("2001:db8:ffff::1")));
        assert!(!net_contains(&v6, ip("2001:db9::1")));
        assert!(!net_contains(&v6, ip("10.0.0.1")));
        assert!(net_contains(&parse_cidr("::/0").unwrap(), ip("::1")));
        assert_eq!(parse_cidr("::1").unwrap().prefix_len(), 128);
        let odd = parse_cidr("fe80::1234/10").unwrap();
        assert_eq!(odd.network(), ip("fe80::"));
        assert!(net_contains(&odd, ip("febf::1")));
        assert!(!net_contains(&odd, ip("fec0::1")));

        for bad in [
            "",
            "10.0.0.0/33",
            "::/129",
            "10.0.0.0/",
            "10.0.0.0/-1",
            "10.0.0.0/+8",
            "10.0.0/8",
            "host",
            "10.0.0.0/8/8",
            "10.0.0.0/256",
        ] {
            let e = parse_cidr(bad).unwrap_err();
            assert!(e.to_string().contains(&format!("`{bad}`")), "{e}");
        }
    }

    #[test]
    fn refused_entries_name_their_reason() {
        for (bad, reason) in [
            ("", "empty entry"),
            ("  ", "empty entry"),
            ("host", "not an IP address"),
            ("10.0.0/8", "not an IP address"),
            ("[::1]/128", "not an IP address"),
            ("10.0.0.0/", "prefix length is not a number"),
            ("10.0.0.0/-1", "prefix length is not a number"),
            ("10.0.0.0/+8", "prefix length is not a number"),
            ("10.0.0.0/8/8", "prefix length is not a number"),
            ("10.0.0.0/ 8", "prefix length is not a number"),
            ("10.0.0.0/33", "prefix length too large"),
            ("::/129", "prefix length too large"),
            ("10.0.0.0/256", "prefix length too large"),
            ("::/99999999999999999999", "prefix length too large"),
        ] {
            assert_eq!(
                parse_cidr(bad),
                Err(CidrError::Invalid {
                    entry: bad.to_owned(),
                    reason
                }),
                "{bad:?}"
            );
        }
        assert_eq!(
            parse_cidr("10.0.0.0/008").unwrap().to_string(),
            "10.0.0.0/8"
        );
        assert_eq!(parse_cidr(" ::1/0128 ").unwrap().to_string(), "::1/128");
        assert_eq!(
            parse_cidr("::ffff:10.1.2.3/104").unwrap().to_string(),
            "::ffff:10.0.0.0/104"
        );
    }

    #[test]
    fn cidr_lists() {
        assert!(parse_cidr_list("").unwrap().is_empty());
        assert!(parse_cidr_list("  ").unwrap().is_empty());
        let l = parse_cidr_list("10.0.0.0/8, 192.168.0.0/16,fd00::/8").unwrap();
        assert_eq!(l.len(), 3);
        let e = parse_cidr_list("10.0.0.0/8,bogus/3,::1").unwrap_err();
        assert_eq!(
            e,
            CidrError::Invalid {
                entry: "bogus/3".into(),
                reason: "not an IP address"
            }
        );
        assert!(parse_cidr_list("10.0.0.0/8,,::1").is_err());
    }

    #[test]
    fn spoofed_header_is_ignored_without_trusted_proxies() {
        let peer = ip("203.0.113.5");
        assert_eq!(client_ip(Some(peer), &["1.2.3.4"], &[]), Some(peer));
        let trusted = parse_cidr_list("10.0.0.0/8").unwrap();
        assert_eq!(client_ip(Some(peer), &["1.2.3.4"], &trusted), Some(peer));
        assert_eq!(client_ip(None, &["1.2.3.4"], &trusted), None);
    }

    #[test]
    fn trusted_chain_is_read_from_the_right() {
        let trusted = parse_cidr_list("10.0.0.0/8,2001:db8:1::/48").unwrap();
        let proxy = Some(ip("10.0.0.1"));
        // Client-supplied left part (spoofed 1.1.1.1) is not reached.
        assert_eq!(
            client_ip(
                proxy,
                &["1.1.1.1, 198.51.100.2, 10.0.0.3, 10.0.0.2"],
                &trusted
            ),
            Some(ip("198.51.100.2"))
        );
        // Several header values are one list, in order.
        assert_eq!(
            client_ip(
                proxy,
                &["1.1.1.1", "198.51.100.2, 10.9.9.9", "10.0.0.2"],
                &trusted
            ),
            Some(ip("198.51.100.2"))
        );
        // No header: the proxy itself.
        assert_eq!(client_ip(proxy, &[], &trusted), proxy);
        // All hops trusted: the leftmost.
        assert_eq!(
            client_ip(proxy, &["10.1.1.1, 10.2.2.2"], &trusted),
            Some(ip("10.1.1.1"))
        );
        // Garbage stops the walk at the last trusted hop.
        assert_eq!(
            client_ip(proxy, &["198.51.100.2, unknown, 10.2.2.2"], &trusted),
            Some(ip("10.2.2.2"))
        );
        assert_eq!(
            client_ip(proxy, &["198.51.100.2, garbage"], &trusted),
            proxy
        );
        assert_eq!(client_ip(proxy, &["198.51.100.2,,"], &trusted), proxy);
        // Ports and brackets.
        assert_eq!(
            client_ip(proxy, &["198.51.100.2:4711"], &trusted),
            Some(ip("198.51.100.2"))
        );
        assert_eq!(
            client_ip(proxy, &["[2001:db8::7]:443"], &trusted),
            Some(ip("2001:db8::7"))
        );
        assert_eq!(
            client_ip(proxy, &["[2001:db8::7]"], &trusted),
            Some(ip("2001:db8::7"))
        );
        // IPv6 proxies and mapped addresses.
        assert_eq!(
            client_ip(
                Some(ip("2001:db8:1::9")),
                &["2001:db8:2::1, 2001:db8:1::8"],
                &trusted
            ),
            Some(ip("2001:db8:2::1"))
        );
        assert_eq!(
            client_ip(
                Some(ip("::ffff:10.0.0.1")),
                &["::ffff:198.51.100.2"],
                &trusted
            ),
            Some(ip("198.51.100.2"))
        );
        assert_eq!(
            client_ip(Some(ip("::ffff:203.0.113.1")), &[], &trusted),
            Some(ip("203.0.113.1"))
        );
    }
}
