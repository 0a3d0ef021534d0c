//! A short, human description of a device from its User-Agent header.

/// Longest stored device description or raw User-Agent.
const MAX_DEVICE_INFO_CHARS: usize = 255;

/// "Firefox 128 on Linux" from a User-Agent; the raw value (cut to 255 characters) when no
/// known browser or system is found; `None` for an empty header.
pub(crate) fn device_info(user_agent: &str) -> Option<String> {
    let user_agent = user_agent.trim();
    if user_agent.is_empty() {
        return None;
    }
    let browser = browser(user_agent);
    let system = system(user_agent);
    Some(match (browser, system) {
        (Some(browser), Some(system)) => format!("{browser} on {system}"),
        (Some(browser), None) => browser,
        (None, Some(system)) => format!("Unknown browser on {system}"),
        (None, None) => user_agent.chars().take(MAX_DEVICE_INFO_CHARS).collect(),
    })
}

fn major_version(user_agent: &str, marker: &str) -> Option<String> {
    let start = user_agent.find(marker)? + marker.len();
    let version: String = user_agent[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    (!version.is_empty()).then_some(version)
}

fn browser(user_agent: &str) -> Option<String> {
    // Order matters: Edge and Opera also claim Chrome, Chrome also claims Safari.
    const BROWSERS: [(&str, &str); 7] = [
        ("Edg/", "Edge"),
        ("OPR/", "Opera"),
        ("Firefox/", "Firefox"),
        ("Chrome/", "Chrome"),
        ("Version/", "Safari"),
        ("curl/", "curl"),
        ("python-requests/", "python-requests"),
    ];
    BROWSERS.iter().find_map(|(marker, name)| {
        if *name == "Safari" && !user_agent.contains("Safari/") {
            return None;
        }
        major_version(user_agent, marker).map(|version| format!("{name} {version}"))
    })
}

fn system(user_agent: &str) -> Option<&'static str> {
    const SYSTEMS: [(&str, &str); 7] = [
        ("Android", "Android"),
        ("iPhone", "iOS"),
        ("iPad", "iPadOS"),
        ("Windows", "Windows"),
        ("Mac OS X", "macOS"),
        ("CrOS", "ChromeOS"),
        ("Linux", "Linux"),
    ];
    SYSTEMS
        .iter()
        .find(|(marker, _)| user_agent.contains(marker))
        .map(|(_, name)| *name)
}

#[cfg(test)]
mod tests {
    use super::device_info;

    #[test]
    fn describes_common_agents() {
        assert_eq!(
            device_info("Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0")
                .as_deref(),
            Some("Firefox 128 on Linux")
        );
        assert_eq!(
            device_info("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36 Edg/126.0.0.0").as_deref(),
            Some("Edge 126 on Windows")
        );
        assert_eq!(
            device_info("Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15").as_deref(),
            Some("Safari 17 on macOS")
        );
        assert_eq!(device_info("curl/8.5.0").as_deref(), Some("curl 8"));
        assert_eq!(device_info("  ").as_deref(), None);
        assert_eq!(device_info(&"x".repeat(400)).map(|d| d.len()), Some(255));
    }
}
