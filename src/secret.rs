//! Secrets in configuration (keys): a string that never appears in logs, `Debug` output,
//! serialised config (`check-config`) or any response.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A string that never appears in logs, `Debug` output or `check-config`.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str("[redacted]")
    }
}

/// A URL as it may be shown (logs, `/readyz`, the console): any user name, password and query
/// string (where some APIs carry their key) replaced by `[redacted]`.
pub fn shown_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            if !parsed.username().is_empty() || parsed.password().is_some() {
                let _ = parsed.set_username("[redacted]");
                let _ = parsed.set_password(None);
            }
            if parsed.query().is_some() {
                parsed.set_query(Some("[redacted]"));
            }
            parsed.to_string().trim_end_matches('/').to_owned()
        }
        Err(_) => "[unparsable URL]".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_urls_carry_no_credentials() {
        assert_eq!(
            shown_url("https://bob:s3cret@llm.example/v1?key=abc"),
            "https://%5Bredacted%5D@llm.example/v1?[redacted]"
        );
        assert_eq!(
            shown_url("http://127.0.0.1:8080/v1"),
            "http://127.0.0.1:8080/v1"
        );
        let secret = Secret::new("sk-live");
        assert_eq!(format!("{secret:?}"), "[redacted]");
        assert_eq!(
            serde_json::to_string(&secret).expect("json"),
            "\"[redacted]\""
        );
    }
}
