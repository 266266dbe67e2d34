//! Configuration: TOML file, environment overrides and command-line flags, validated once at start-up.
//!
//! Precedence is flags > environment > file > built-in defaults. `config/memproxy.toml` documents
//! every key with its default (a test keeps the two in step). Validation happens here so that a
//! bad value stops start-up with a message naming the key, instead of surfacing on the first request.

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::mode::Mode;
pub use crate::secret::Secret;
pub use server::ServerConfig;
pub use upstream::UpstreamConfig;

pub mod embedding;
pub mod explicit;
pub mod memory;
mod server;
pub mod upstream;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid config: {key}: {message}")]
    Invalid { key: String, message: String },
}

fn invalid(key: &str, message: impl fmt::Display) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_owned(),
        message: message.to_string(),
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address the proxy listens on.
    pub listen: SocketAddr,
    /// Default memory strategy when neither header nor route prefix picks one.
    pub mode: Mode,
    /// Where the database, vector index and models live.
    pub data_dir: PathBuf,
    pub store: crate::store::StoreConfig,
    pub upstream: UpstreamConfig,
    pub server: ServerConfig,
    pub auth: AuthConfig,
    pub embedding: embedding::EmbeddingConfig,
    pub memory: memory::MemoryConfig,
    pub explicit: explicit::ExplicitConfig,
    pub limits: crate::limits::Limits,
    pub log: LogConfig,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Proxy keys, each `key`, `tenant:key` or `tenant/user:key` (restricted to that user; see
    /// `keys.rs`). Empty: auth off.
    pub api_keys: Vec<Secret>,
    /// Key for the management API (`/memproxy/v1`), acting for any tenant.
    pub admin_key: Option<Secret>,
    /// Serve on a non-loopback address without proxy keys: anyone who reaches it can chat as
    /// any user (and so read their memories) and spend the upstream key. Off by default.
    pub allow_unauthenticated: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// A tracing filter such as `info` or `memproxy=debug,tower_http=info` (`RUST_LOG` wins).
    pub level: String,
    pub format: LogFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            mode: Mode::Passthrough,
            data_dir: PathBuf::from("./.memproxy"),
            upstream: UpstreamConfig::default(),
            server: ServerConfig::default(),
            store: crate::store::StoreConfig::default(),
            auth: AuthConfig::default(),
            embedding: embedding::EmbeddingConfig::default(),
            memory: memory::MemoryConfig::default(),
            explicit: explicit::ExplicitConfig::default(),
            limits: crate::limits::Limits::default(),
            log: LogConfig::default(),
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: "info".to_owned(),
            format: LogFormat::Text,
        }
    }
}

/// Values given on the command line; `None` leaves the lower layers in charge.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub listen: Option<String>,
    pub mode: Option<String>,
    pub upstream: Option<String>,
}

impl Config {
    /// Loads the file (if any), applies `env` and `flags`, and validates the result.
    pub fn load(
        file: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
        flags: &Overrides,
    ) -> Result<Config, ConfigError> {
        let mut config = match file {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        config.apply_env(env)?;
        config.apply_flags(flags)?;
        config.validate()?;
        Ok(config)
    }

    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|error| ConfigError::Parse {
            path: path.to_owned(),
            message: error.to_string(),
        })
    }

    fn apply_env(&mut self, env: &dyn Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        let non_empty = |name: &str| env(name).filter(|value| !value.trim().is_empty());
        if let Some(listen) = non_empty("MEMPROXY_LISTEN") {
            self.listen = parse_listen("MEMPROXY_LISTEN", &listen)?;
        }
        if let Some(url) = non_empty("MEMPROXY_UPSTREAM_URL") {
            self.upstream.url = url;
        }
        if let Some(key) = non_empty("MEMPROXY_UPSTREAM_API_KEY") {
            self.upstream.api_key = Some(Secret::new(key));
        } else if self.upstream.api_key.is_none() {
            self.upstream.api_key = non_empty("OPENAI_API_KEY").map(Secret::new);
        }
        for (api, upstream, fallback_key) in [
            (
                "MESSAGES",
                &mut self.upstream.messages,
                Some("ANTHROPIC_API_KEY"),
            ),
            ("RESPONSES", &mut self.upstream.responses, None),
            ("OLLAMA", &mut self.upstream.ollama, None),
        ] {
            if let Some(url) = non_empty(&format!("MEMPROXY_{api}_UPSTREAM_URL")) {
                upstream.get_or_insert_with(Default::default).url = url;
            }
            if let Some(upstream) = upstream.as_mut() {
                let key = non_empty(&format!("MEMPROXY_{api}_UPSTREAM_API_KEY"));
                if let Some(key) = key {
                    upstream.api_key = Some(Secret::new(key));
                } else if upstream.api_key.is_none() {
                    upstream.api_key = fallback_key.and_then(non_empty).map(Secret::new);
                }
            }
        }
        if let Some(mode) = non_empty("MEMPROXY_MODE") {
            self.mode = mode
                .parse()
                .map_err(|error| invalid("MEMPROXY_MODE", error))?;
        }
        if let Some(dir) = non_empty("MEMPROXY_DATA_DIR") {
            self.data_dir = PathBuf::from(dir);
        }
        if let Some(url) = non_empty("MEMPROXY_DATABASE_URL") {
            self.store.url = Some(Secret::new(url));
            self.store.backend = crate::store::Backend::Postgres;
        }
        if let Some(dir) = non_empty("MEMPROXY_EMBEDDING_MODEL_DIR") {
            self.embedding.model_dir = Some(PathBuf::from(dir));
        }
        if let Some(key) = non_empty("MEMPROXY_ADMIN_KEY") {
            self.auth.admin_key = Some(Secret::new(key));
        }
        if let Some(hosts) = env("MEMPROXY_ALLOWED_HOSTS") {
            self.server.allowed_hosts = server::list(&hosts);
        }
        if let Some(origins) = env("MEMPROXY_ALLOWED_ORIGINS") {
            self.server.allowed_origins = server::list(&origins);
        }
        if let Some(allow) = non_empty("MEMPROXY_ALLOW_UNAUTHENTICATED") {
            self.auth.allow_unauthenticated = parse_bool("MEMPROXY_ALLOW_UNAUTHENTICATED", &allow)?;
        }
        if let Some(keys) = env("MEMPROXY_API_KEYS") {
            self.auth.api_keys = keys
                .split(',')
                .map(str::trim)
                .filter(|key| !key.is_empty())
                .map(Secret::new)
                .collect();
        }
        Ok(())
    }

    fn apply_flags(&mut self, flags: &Overrides) -> Result<(), ConfigError> {
        if let Some(listen) = &flags.listen {
            self.listen = parse_listen("--listen", listen)?;
        }
        if let Some(mode) = &flags.mode {
            self.mode = mode.parse().map_err(|error| invalid("--mode", error))?;
        }
        if let Some(url) = &flags.upstream {
            self.upstream.url = url.clone();
        }
        Ok(())
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(problem) = self.store.problem() {
            return Err(invalid("store", problem));
        }
        let url = reqwest::Url::parse(&self.upstream.url).map_err(|error| {
            invalid("upstream.url", format!("'{}': {error}", self.upstream.url))
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid(
                "upstream.url",
                "must start with http:// or https://",
            ));
        }
        for (key, api) in [
            ("upstream.messages.url", &self.upstream.messages),
            ("upstream.responses.url", &self.upstream.responses),
            ("upstream.ollama.url", &self.upstream.ollama),
        ] {
            if let Some(api) = api {
                let url = reqwest::Url::parse(&api.url)
                    .map_err(|error| invalid(key, format!("'{}': {error}", api.url)))?;
                if !matches!(url.scheme(), "http" | "https") {
                    return Err(invalid(key, "must start with http:// or https://"));
                }
            }
        }
        let timeouts = [
            ("upstream.connect_timeout", self.upstream.connect_timeout),
            (
                "upstream.first_byte_timeout",
                self.upstream.first_byte_timeout,
            ),
            ("upstream.idle_timeout", self.upstream.idle_timeout),
            ("upstream.total_timeout", self.upstream.total_timeout),
        ];
        for (key, value) in timeouts {
            if value.is_zero() {
                return Err(invalid(key, "must be greater than zero"));
            }
        }
        self.server.validate()?;
        self.tenant_keys()?;
        self.exposure(self.listen)?;
        if self
            .auth
            .admin_key
            .as_ref()
            .is_some_and(|k| k.expose().trim().is_empty())
        {
            return Err(invalid("auth.admin_key", "must not be empty"));
        }
        self.explicit
            .validate()
            .map_err(|message| invalid("explicit", message))?;
        self.limits
            .validate()
            .map_err(|message| invalid("limits", message))?;
        if self.embedding.threads == 0 {
            return Err(invalid("embedding.threads", "must be at least 1"));
        }
        if self.embedding.provider == embedding::EmbeddingProvider::Openai {
            reqwest::Url::parse(&self.embedding.url)
                .map_err(|error| invalid("embedding.url", error))?;
            if self.embedding.dimensions == 0 {
                return Err(invalid("embedding.dimensions", "must be at least 1"));
            }
        }
        Ok(())
    }

    /// Whether serving on `addr` exposes memories: without proxy keys anyone who reaches the
    /// address can chat as any user (their memories are injected into the answer), read the
    /// management API when no admin key is set either, and spend the upstream key. That is only
    /// allowed on loopback, or with `auth.allow_unauthenticated`; the answer is then the warning
    /// to log and show on `/readyz`.
    pub fn exposure(&self, addr: SocketAddr) -> Result<Option<String>, ConfigError> {
        if !self.auth.api_keys.is_empty() || addr.ip().is_loopback() {
            return Ok(None);
        }
        let what = if self.auth.admin_key.is_some() {
            "the chat routes are open: anyone who reaches it can chat as any user, get that user's memories injected into the answer and spend the upstream key"
        } else {
            "anyone who reaches it can read, edit and delete every user's memories, chat as any user and spend the upstream key"
        };
        if self.auth.allow_unauthenticated {
            return Ok(Some(format!(
                "memproxy serves {addr} without proxy keys (auth.allow_unauthenticated): {what}"
            )));
        }
        Err(invalid(
            "auth",
            format!(
                "memproxy would listen on {addr}, which is not a loopback address, with no proxy keys: {what}. \
                 Either set keys (MEMPROXY_API_KEYS=tenant:key,... for clients, and MEMPROXY_ADMIN_KEY=... for the \
                 management API and console; or auth.api_keys / auth.admin_key in the config file), or opt out \
                 knowingly with MEMPROXY_ALLOW_UNAUTHENTICATED=true (auth.allow_unauthenticated = true), \
                 or listen on 127.0.0.1"
            ),
        ))
    }

    /// The proxy keys as a map from the SHA-256 of the key to what it grants (see
    /// [`crate::keys`]): keyed by digest so that lookups do not compare secrets byte by byte, and
    /// so the raw key never needs to be kept next to its tenant.
    pub fn tenant_keys(&self) -> Result<HashMap<[u8; 32], crate::keys::KeyGrant>, ConfigError> {
        crate::keys::grants(self.auth.api_keys.iter().map(Secret::expose))
            .map_err(|message| invalid("auth.api_keys", message))
    }
}

fn parse_bool(key: &str, text: &str) -> Result<bool, ConfigError> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        other => Err(invalid(key, format!("'{other}' is not true or false"))),
    }
}

fn parse_listen(key: &str, text: &str) -> Result<SocketAddr, ConfigError> {
    text.trim().parse().map_err(|_| {
        invalid(
            key,
            format!("'{text}' is not an address like 127.0.0.1:8080"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::key_digest;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn documented_file_matches_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/memproxy.toml");
        let documented = Config::from_file(&path).expect("config/memproxy.toml parses");
        let shown = |c: &Config| toml::to_string(c).expect("serializes");
        assert_eq!(shown(&documented), shown(&Config::default()));
    }

    /// A setting that can be off is written `"off"` and reads back as off (a config printed by
    /// `check-config` loads again as the same config).
    #[test]
    fn a_duration_that_can_be_off_round_trips() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("m.toml");
        std::fs::write(&file, "[memory]\nconsolidation_delay = \"off\"\n").expect("write");
        let off = Config::from_file(&file).expect("loads");
        assert_eq!(off.memory.consolidation_delay, None);
        std::fs::write(&file, toml::to_string(&off).expect("prints")).expect("write");
        assert_eq!(
            Config::from_file(&file)
                .expect("reloads")
                .memory
                .consolidation_delay,
            None
        );
        std::fs::write(&file, "[memory]\nconsolidation_delay = \"soon\"\n").expect("write");
        let error = Config::from_file(&file).expect_err("refused").to_string();
        assert!(error.contains("\"off\""), "{error}");
    }

    #[test]
    fn flags_beat_env_beat_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("m.toml");
        std::fs::write(
            &file,
            "listen = \"127.0.0.1:1000\"\nmode = \"window\"\n[upstream]\nurl = \"http://file/v1\"\n",
        )
        .expect("write");
        let env = env_of(&[
            ("MEMPROXY_LISTEN", "127.0.0.1:2000"),
            ("MEMPROXY_UPSTREAM_URL", "http://env/v1"),
            ("OPENAI_API_KEY", "sk-fallback"),
        ]);
        let flags = Overrides {
            upstream: Some("http://flag/v1".into()),
            ..Overrides::default()
        };
        let config = Config::load(Some(&file), &env, &flags).expect("loads");
        assert_eq!(config.listen.port(), 2000);
        assert_eq!(config.mode, Mode::Window);
        assert_eq!(config.upstream.url, "http://flag/v1");
        assert_eq!(config.upstream.api_key, Some(Secret::new("sk-fallback")));

        let env = env_of(&[
            ("MEMPROXY_UPSTREAM_API_KEY", "sk-memproxy"),
            ("OPENAI_API_KEY", "sk-fallback"),
        ]);
        let config = Config::load(None, &env, &Overrides::default()).expect("loads");
        assert_eq!(config.upstream.api_key, Some(Secret::new("sk-memproxy")));
    }

    #[test]
    fn errors_name_the_key() {
        let no_env = env_of(&[]);
        let bad_mode = Overrides {
            mode: Some("memgpt".into()),
            ..Overrides::default()
        };
        let error = Config::load(None, &no_env, &bad_mode).expect_err("bad mode");
        assert!(error.to_string().contains("--mode"), "{error}");

        let env = env_of(&[("MEMPROXY_UPSTREAM_URL", "ftp://x/v1")]);
        let error = Config::load(None, &env, &Overrides::default()).expect_err("bad url");
        assert!(error.to_string().contains("upstream.url"), "{error}");

        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("m.toml");
        std::fs::write(&file, "[upstream]\nconect_timeout = \"1s\"\n").expect("write");
        let error = Config::load(Some(&file), &no_env, &Overrides::default()).expect_err("typo");
        assert!(error.to_string().contains("conect_timeout"), "{error}");

        std::fs::write(&file, "[upstream]\nidle_timeout = \"soon\"\n").expect("write");
        let error = Config::load(Some(&file), &no_env, &Overrides::default()).expect_err("bad");
        assert!(error.to_string().contains("idle_timeout"), "{error}");
    }

    #[test]
    fn an_upstream_per_api_from_the_file_or_the_environment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("m.toml");
        std::fs::write(
            &file,
            "[upstream.messages]\nurl = \"https://api.anthropic.com/v1\"\n",
        )
        .expect("write");
        let env = env_of(&[
            ("ANTHROPIC_API_KEY", "sk-ant"),
            ("MEMPROXY_RESPONSES_UPSTREAM_URL", "http://127.0.0.1:9/v1"),
            ("MEMPROXY_RESPONSES_UPSTREAM_API_KEY", "sk-resp"),
            ("MEMPROXY_OLLAMA_UPSTREAM_URL", "http://127.0.0.1:11434"),
        ]);
        let config = Config::load(Some(&file), &env, &Overrides::default()).expect("loads");
        let messages = config.upstream.messages.as_ref().expect("messages");
        assert_eq!(messages.url, "https://api.anthropic.com/v1");
        assert_eq!(
            messages.api_key.as_ref().map(Secret::expose),
            Some("sk-ant")
        );
        let responses = config.upstream.responses.as_ref().expect("responses");
        assert_eq!(responses.url, "http://127.0.0.1:9/v1");
        assert_eq!(
            responses.api_key.as_ref().map(Secret::expose),
            Some("sk-resp")
        );
        let ollama = config.upstream.ollama.as_ref().expect("ollama");
        assert_eq!(ollama.url, "http://127.0.0.1:11434");
        assert!(ollama.api_key.is_none());
        // Without its section, no key of another API is picked up.
        let config = Config::load(
            None,
            &env_of(&[("ANTHROPIC_API_KEY", "sk-ant")]),
            &Overrides::default(),
        )
        .expect("loads");
        assert!(config.upstream.messages.is_none());
        std::fs::write(&file, "[upstream.messages]\nurl = \"ftp://x\"\n").expect("write");
        let error =
            Config::load(Some(&file), &env_of(&[]), &Overrides::default()).expect_err("bad");
        assert!(
            error.to_string().contains("upstream.messages.url"),
            "{error}"
        );
    }

    #[test]
    fn keys_map_to_tenants_and_stay_redacted() {
        let env = env_of(&[("MEMPROXY_API_KEYS", "acme:sk-a, sk-b ,")]);
        let config = Config::load(None, &env, &Overrides::default()).expect("loads");
        let keys = config.tenant_keys().expect("valid");
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[&key_digest("sk-a")].tenant, "acme");
        assert!(keys[&key_digest("sk-b")].tenant.starts_with("key-"));
        let shown = format!("{config:?}{}", toml::to_string(&config).expect("toml"));
        assert!(
            !shown.contains("sk-a") && !shown.contains("sk-b"),
            "{shown}"
        );
    }
}
