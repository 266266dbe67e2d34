//! Proxy keys and what each one grants: a tenant, and optionally one user of it.
//!
//! `auth.api_keys` entries are `key` (a tenant of its own, named from the key's digest),
//! `tenant:key`, or `tenant/user:key` — a key restricted to one user. A restricted key acts as its
//! user on every path: chat (any API), the management API (only that user's routes) and MCP; a
//! request naming another user with `X-Memproxy-User` is refused with 403, and the body's `user`
//! field (which OpenAI clients fill for their own purposes) is ignored. Keys are looked up by
//! SHA-256 digest and never kept next to their grant in the clear.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

/// What a proxy key grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyGrant {
    pub tenant: String,
    /// The only user the key may act as; `None`: any user of the tenant.
    pub user: Option<String>,
}

impl KeyGrant {
    pub fn tenant(tenant: &str) -> KeyGrant {
        KeyGrant {
            tenant: tenant.to_owned(),
            user: None,
        }
    }

    /// The user a request acts as, given the one it names (header): the key's own user, which a
    /// different name may not override; else the named one.
    pub fn user_for(&self, named: Option<String>) -> Result<Option<String>, String> {
        match (&self.user, named) {
            (Some(own), Some(named)) if own != &named => Err(format!(
                "this key acts only for user '{own}', not '{named}'"
            )),
            (Some(own), _) => Ok(Some(own.clone())),
            (None, named) => Ok(named),
        }
    }
}

pub fn key_digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// Tenant name for a key listed without one: stable, and reveals nothing usable about the key.
fn anonymous_tenant(key: &str) -> String {
    format!("key-{}", &hex::encode(key_digest(key))[..12])
}

/// Reads the key entries into a map from each key's digest to its grant; the error names what is
/// wrong with an entry without showing it.
pub fn grants<'a>(
    entries: impl IntoIterator<Item = &'a str>,
) -> Result<HashMap<[u8; 32], KeyGrant>, String> {
    let mut keys = HashMap::new();
    for entry in entries {
        let (grant, key) = match entry.split_once(':') {
            Some((who, key)) => {
                let (tenant, user) = match who.split_once('/') {
                    Some((tenant, user)) => (tenant, Some(user.trim())),
                    None => (who, None),
                };
                (
                    KeyGrant {
                        tenant: tenant.to_owned(),
                        user: user.map(str::to_owned),
                    },
                    key,
                )
            }
            None => (KeyGrant::tenant(&anonymous_tenant(entry)), entry),
        };
        if key.is_empty() || key.chars().any(char::is_whitespace) {
            return Err("a key is empty or contains whitespace".to_owned());
        }
        let tenant = &grant.tenant;
        let tenant_ok = !tenant.is_empty()
            && tenant.len() <= 64
            && tenant
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
        if !tenant_ok {
            return Err(format!(
                "tenant '{tenant}' must be 1-64 characters of A-Z a-z 0-9 - _ ."
            ));
        }
        if let Some(user) = &grant.user {
            if user.is_empty() || user.len() > 256 || user.chars().any(char::is_control) {
                return Err(format!(
                    "the user of a key for tenant '{tenant}' must be 1-256 bytes without control characters"
                ));
            }
        }
        if keys.insert(key_digest(key), grant).is_some() {
            return Err("the same key is listed twice".to_owned());
        }
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_grant_a_tenant_or_one_user() {
        let keys = grants(["acme:sk-a", "sk-b", "acme/alice:sk-c"]).expect("valid");
        assert_eq!(keys[&key_digest("sk-a")], KeyGrant::tenant("acme"));
        assert!(keys[&key_digest("sk-b")].tenant.starts_with("key-"));
        let alice = &keys[&key_digest("sk-c")];
        assert_eq!(
            (alice.tenant.as_str(), alice.user.as_deref()),
            ("acme", Some("alice"))
        );
        assert_eq!(alice.user_for(None), Ok(Some("alice".to_owned())));
        assert_eq!(
            alice.user_for(Some("alice".to_owned())),
            Ok(Some("alice".to_owned()))
        );
        assert!(alice.user_for(Some("bob".to_owned())).is_err());
        assert_eq!(
            keys[&key_digest("sk-a")].user_for(Some("bob".to_owned())),
            Ok(Some("bob".to_owned()))
        );
        for bad in ["acme/:sk", "ac me:sk", "acme:", "acme/a:sk x"] {
            assert!(grants([bad]).is_err(), "{bad}");
        }
        assert!(grants(["a:k", "b:k"]).is_err());
    }
}
