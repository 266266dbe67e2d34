//! Memory strategies by name, and how a request picks one.
//!
//! The strategy for a request comes from the `X-Memproxy-Mode` header, else the route prefix
//! (`/{mode}/v1/...`), else the configured default (architecture §1). Keeping the names in one enum
//! lets config, routes, headers and metrics agree on spelling.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Forward unchanged: no memory. The baseline for comparisons.
    Passthrough,
    /// Keep only the newest turns that fit a token budget.
    Window,
    /// Rolling summary of older turns plus the newest turns.
    Summary,
    /// Memory injected by a pre-processor; the chat model never knows.
    Implicit,
    /// The MemGPT tool loop runs inside the proxy.
    Explicit,
}

impl Mode {
    pub const ALL: [Mode; 5] = [
        Mode::Passthrough,
        Mode::Window,
        Mode::Summary,
        Mode::Implicit,
        Mode::Explicit,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Passthrough => "passthrough",
            Mode::Window => "window",
            Mode::Summary => "summary",
            Mode::Implicit => "implicit",
            Mode::Explicit => "explicit",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown mode '{0}' (expected one of passthrough, window, summary, implicit, explicit)")]
pub struct UnknownMode(pub String);

impl FromStr for Mode {
    type Err = UnknownMode;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let wanted = text.trim().to_ascii_lowercase();
        Mode::ALL
            .into_iter()
            .find(|mode| mode.as_str() == wanted)
            .ok_or_else(|| UnknownMode(text.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_name_and_rejects_others() {
        for mode in Mode::ALL {
            assert_eq!(mode.as_str().parse::<Mode>().ok(), Some(mode));
        }
        assert_eq!(" Implicit ".parse::<Mode>().ok(), Some(Mode::Implicit));
        assert!("memgpt".parse::<Mode>().is_err());
    }
}
