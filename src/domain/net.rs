//! IP networks: `TRUSTED_PROXIES`, the client networks logins are counted by (IPv4 /32,
//! IPv6 /64: one subscriber's allocation, so a client cannot rotate through its own /64),
//! and `OUTBOUND_DENY`, the addresses notifications and connections are never sent to.

use std::net::{IpAddr, Ipv6Addr};
use std::str::FromStr;

/// A network: an address, or an address and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

impl FromStr for IpNet {
    type Err = String;

    fn from_str(text: &str) -> Result<IpNet, String> {
        let text = text.trim();
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| format!("{text:?} is not an IP address or CIDR network"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{text:?}: the prefix length must be 0 to {max}"))?,
        };
        Ok(IpNet { addr: addr.to_canonical(), prefix })
    }
}

impl IpNet {
    pub fn contains(&self, ip: IpAddr) -> bool {
        let bits = |ip: IpAddr| -> u128 {
            match ip {
                IpAddr::V4(v4) => u128::from(u32::from(v4)) << 96,
                IpAddr::V6(v6) => u128::from(v6),
            }
        };
        let ip = ip.to_canonical();
        if ip.is_ipv4() != self.addr.is_ipv4() {
            return false;
        }
        let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix)).unwrap_or(0);
        bits(ip) & mask == bits(self.addr) & mask
    }
}

/// The network a client's failed logins are counted by: the address itself for IPv4, its
/// /64 for IPv6 (an IPv6 subscriber holds at least a /64 and can use any address in it).
pub fn client_network(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & (u128::MAX << 64))),
    }
}

/// `OUTBOUND_DENY`: networks no notification or connection is sent to, checked on every
/// address a target's name resolves to, before connecting. Entries are CIDR networks or
/// the names `link-local`, `metadata` (the cloud metadata address), `private` (RFC 1918,
/// carrier-grade NAT, IPv6 unique local), `loopback`, or `none` alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundDeny(pub Vec<IpNet>);

/// What `OUTBOUND_DENY` is when unset: nothing on a LAN is refused (the media stack lives
/// there), but the link-local range and the metadata address, where cloud credentials are
/// served, are.
pub const DEFAULT_OUTBOUND_DENY: &str = "link-local,metadata";

impl Default for OutboundDeny {
    fn default() -> Self {
        DEFAULT_OUTBOUND_DENY.parse().unwrap_or(OutboundDeny(Vec::new()))
    }
}

impl FromStr for OutboundDeny {
    type Err = String;

    fn from_str(text: &str) -> Result<OutboundDeny, String> {
        let mut nets = Vec::new();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let named: &[&str] = match entry.to_ascii_lowercase().as_str() {
                "none" => &[],
                "link-local" => &["169.254.0.0/16", "fe80::/10"],
                "metadata" => &["169.254.169.254", "fd00:ec2::254"],
                "private" => &["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7"],
                "loopback" => &["127.0.0.0/8", "::1"],
                _ => {
                    nets.push(entry.parse::<IpNet>()?);
                    continue;
                }
            };
            for net in named {
                nets.push(net.parse::<IpNet>()?);
            }
        }
        Ok(OutboundDeny(nets))
    }
}

impl OutboundDeny {
    pub fn refuses(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|net| net.contains(ip))
    }
}

/// Whether two URLs name the same origin: scheme, host and port (a default port and its
/// absence are the same). A secret given for one origin is not sent to another: a URL
/// changed to another origin without the secret given again loses it.
pub fn same_origin(a: &str, b: &str) -> bool {
    match (origin(a), origin(b)) {
        (Some(a), Some(b)) => a == b,
        // Not a URL on one side: nothing to compare, so the secret is not carried over.
        _ => false,
    }
}

/// A URL's scheme and authority, split: `scheme://user@host:port/…` (trimmed), the host of
/// an IPv6 address without its brackets (`bracketed`).
struct Authority<'a> {
    scheme: &'a str,
    user: &'a str,
    host: &'a str,
    bracketed: bool,
    port: Option<&'a str>,
}

/// `url`'s authority; None without `://`, or with a bracket left open or followed by
/// anything but a port.
fn authority(url: &str) -> Option<Authority<'_>> {
    let (scheme, rest) = url.trim().split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let (user, host_port) = authority.rsplit_once('@').unwrap_or(("", authority));
    let (host, bracketed, port) = match host_port.strip_prefix('[') {
        Some(bracketed) => {
            let (host, after) = bracketed.split_once(']')?;
            if !(after.is_empty() || after.starts_with(':')) {
                return None;
            }
            (host, true, after.strip_prefix(':'))
        }
        None => host_port.split_once(':').map_or((host_port, false, None), |(host, port)| (host, false, Some(port))),
    };
    Some(Authority { scheme, user, host, bracketed, port })
}

/// Whether the authority of `url` is one RFC 3986 allows: user information of unreserved
/// characters, %-escapes, sub-delimiters and `:`; a host of the same but `:`, or an IPv6
/// address in brackets; a port of digits. Checked when a notification target or a
/// connection is saved, so that a URL no request could go to is refused then, not at its
/// first delivery (nor passed on to whoever reads it back).
pub fn valid_authority(url: &str) -> bool {
    let Some(Authority { user, host, bracketed, port, .. }) = authority(url) else { return false };
    let plain = |c: char| c.is_ascii_alphanumeric() || "-._~%!$&'()*+,;=".contains(c);
    let host_ok = if bracketed {
        host.chars().all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
    } else {
        host.chars().all(plain)
    };
    !host.is_empty()
        && host_ok
        && user.chars().all(|c| plain(c) || c == ':')
        && port.is_none_or(|p| p.chars().all(|c| c.is_ascii_digit()))
}

/// (scheme, host, port) of a URL, lower-cased, the port defaulted by scheme.
fn origin(url: &str) -> Option<(String, String, Option<u16>)> {
    // Credentials in the URL are not part of the origin.
    let Authority { scheme, host, port, .. } = authority(url)?;
    let scheme = scheme.to_ascii_lowercase();
    let port = match port.filter(|p| !p.is_empty()) {
        Some(port) => Some(port.parse::<u16>().ok()?),
        None => match scheme.as_str() {
            "http" => Some(80),
            "https" => Some(443),
            "smtp" => Some(25),
            "smtps" => Some(465),
            _ => None,
        },
    };
    Some((scheme, host.to_ascii_lowercase(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_authority_is_taken_as_rfc_3986_writes_it() {
        for taken in [
            "http://plex:32400",
            "https://user:p%40ss@hooks.example.org/a?b=c#d",
            "  http://[::1]:8080/notify  ",
            "http://[fe80::1]",
            "smtp://user@mail.example.org:587?from=a@example.org&to=b@example.org",
            "http://host_name.lan:/x",
        ] {
            assert!(valid_authority(taken), "{taken}");
        }
        for refused in [
            "http://[abc",
            "http://a]b/",
            "http://[::1]x",
            "http://[]/",
            "http://host:port",
            "http:///path",
            "http://a b.example",
            "http://us[er@host",
            "no scheme",
        ] {
            assert!(!valid_authority(refused), "{refused}");
        }
    }

    #[test]
    fn networks_parse_and_match() {
        let net: IpNet = "10.1.0.0/16".parse().unwrap();
        assert!(net.contains("10.1.200.3".parse().unwrap()));
        assert!(!net.contains("10.2.0.1".parse().unwrap()));
        assert!(net.contains("::ffff:10.1.0.9".parse().unwrap()));
        let one: IpNet = "192.0.2.7".parse().unwrap();
        assert!(one.contains("192.0.2.7".parse().unwrap()) && !one.contains("192.0.2.8".parse().unwrap()));
        let v6: IpNet = "fd00::/8".parse().unwrap();
        assert!(v6.contains("fd12::1".parse().unwrap()) && !v6.contains("fe80::1".parse().unwrap()));
        let all: IpNet = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("203.0.113.1".parse().unwrap()));
        for bad in ["", "10.0.0.0/33", "fd00::/129", "example.com", "10.0.0.0/x"] {
            assert!(bad.parse::<IpNet>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn an_origin_is_scheme_host_and_port() {
        for (a, b) in [
            ("http://plex:32400", "http://plex:32400/library"),
            ("http://Plex:32400/", "http://plex:32400?x=1"),
            ("https://example.com", "https://example.com:443/path"),
            ("http://[fd00::1]:8989", "http://[FD00::1]:8989/api"),
            ("https://user:pw@hooks.example/a", "https://hooks.example/b"),
        ] {
            assert!(same_origin(a, b), "{a} {b}");
        }
        for (a, b) in [
            ("http://plex:32400", "https://plex:32400"),
            ("http://plex:32400", "http://elsewhere:32400"),
            ("http://plex:32400", "http://plex:32401"),
            ("https://example.com", "https://example.com.evil.test"),
            ("https://example.com", "https://evil.test/@example.com"),
            ("http://plex", "not a url"),
            ("http://plex:99999", "http://plex:99999"),
        ] {
            assert!(!same_origin(a, b), "{a} {b}");
        }
    }

    #[test]
    fn clients_are_counted_by_address_for_ipv4_and_by_64_for_ipv6() {
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        assert_eq!(client_network(ip("203.0.113.7")), ip("203.0.113.7"));
        assert_eq!(client_network(ip("::ffff:203.0.113.7")), ip("203.0.113.7"));
        assert_eq!(client_network(ip("2001:db8:1:2:aaaa::1")), ip("2001:db8:1:2::"));
        assert_eq!(client_network(ip("2001:db8:1:2:ffff:ffff:ffff:ffff")), ip("2001:db8:1:2::"));
        assert_ne!(client_network(ip("2001:db8:1:3::1")), ip("2001:db8:1:2::"));
    }

    #[test]
    fn outbound_deny_refuses_its_networks_and_the_default_the_metadata_address() {
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        let default = OutboundDeny::default();
        assert!(default.refuses(ip("169.254.169.254")));
        assert!(default.refuses(ip("169.254.1.1")));
        assert!(default.refuses(ip("fe80::1")));
        for allowed in ["127.0.0.1", "192.168.1.10", "10.0.0.5", "203.0.113.1", "::1"] {
            assert!(!default.refuses(ip(allowed)), "{allowed}");
        }
        let private: OutboundDeny = "private, metadata".parse().unwrap();
        for refused in ["10.1.2.3", "172.20.0.1", "192.168.0.1", "100.64.0.1", "fd12::1", "169.254.169.254"] {
            assert!(private.refuses(ip(refused)), "{refused}");
        }
        assert!(!private.refuses(ip("203.0.113.1")));
        let custom: OutboundDeny = "198.51.100.0/24".parse().unwrap();
        assert!(custom.refuses(ip("198.51.100.9")) && !custom.refuses(ip("198.51.101.9")));
        assert_eq!("none".parse::<OutboundDeny>().unwrap(), OutboundDeny(Vec::new()));
        assert!("nonsense".parse::<OutboundDeny>().is_err());
    }
}
