//! `--public-origin`: the address users reach the dashboard at through a TLS proxy.

/// An origin as browsers send it in `Origin`: `scheme://host[:port]`, lower case, the
/// scheme's default port left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicOrigin {
    origin: String,
    authority: String,
}

impl PublicOrigin {
    /// Parses `http(s)://host[:port]` (one trailing `/` allowed; no path, query, user or
    /// fragment).
    ///
    /// # Errors
    /// What is wrong with `text`, for a usage error.
    pub fn parse(text: &str) -> Result<PublicOrigin, String> {
        let bad = |why: &str| {
            Err(format!(
                "{text:?}: {why}; expected the address users open, as https://HOST[:PORT] \
                 (e.g. https://dash.example)"
            ))
        };
        let lower = text.to_ascii_lowercase();
        let Some((scheme, rest)) = lower.split_once("://") else {
            return bad("no scheme");
        };
        let default_port = match scheme {
            "https" => ":443",
            "http" => ":80",
            _ => return bad("the scheme must be https or http"),
        };
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.is_empty()
            || !authority
                .bytes()
                .all(|b| b.is_ascii_graphic() && !b"/?#@\\".contains(&b))
        {
            return bad("not a host[:port] alone");
        }
        let authority = authority.strip_suffix(default_port).unwrap_or(authority);
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !port.contains(']') => (host, Some(port)),
            _ => (authority, None),
        };
        if host.is_empty() || port.is_some_and(|p| p.parse::<u16>().map_or(true, |p| p == 0)) {
            return bad("not a host[:port] alone");
        }
        Ok(PublicOrigin {
            origin: format!("{scheme}://{authority}"),
            authority: authority.to_owned(),
        })
    }

    /// Whether an `Origin` header names this origin.
    pub fn is_origin(&self, origin: &str) -> bool {
        origin.eq_ignore_ascii_case(&self.origin)
    }

    /// Whether a `Host` header names this origin's host (and port).
    pub fn is_host(&self, host: &str) -> bool {
        host.eq_ignore_ascii_case(&self.authority)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// The origin is kept as browsers send it (lower case, default port left out), and
    /// anything but `http(s)://host[:port]` is refused.
    #[test]
    fn a_public_origin_is_a_scheme_and_host_as_browsers_send_them() {
        let origin = PublicOrigin::parse("HTTPS://Dash.Example:443/").unwrap();
        assert!(origin.is_origin("https://dash.example"));
        assert!(origin.is_host("dash.example") && origin.is_host("DASH.example"));
        assert!(!origin.is_origin("http://dash.example"));
        assert!(!origin.is_host("dash.example:443"));
        let ported = PublicOrigin::parse("https://dash.example:8443").unwrap();
        assert!(
            ported.is_origin("https://dash.example:8443") && ported.is_host("dash.example:8443")
        );
        assert!(
            PublicOrigin::parse("https://[::1]:8443")
                .unwrap()
                .is_host("[::1]:8443")
        );
        for bad in [
            "dash.example",
            "ftp://dash.example",
            "https://",
            "https://dash.example/ui",
            "https://user@dash.example",
            "https://dash.example:x",
            "https://dash.example:0",
            "https://dash example",
        ] {
            assert!(PublicOrigin::parse(bad).is_err(), "{bad}");
        }
    }
}
