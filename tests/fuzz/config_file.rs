//! Config loading: the shipped `config/memproxy.toml` with values changed, removed or of the wrong
//! type, any text at all, and any environment: the load either succeeds or fails with a message;
//! it never panics, and never repeats a key it was given in that message.

use memproxy::config::{Config, Overrides};
use proptest::prelude::*;

const SECRET: &str = "sk-fuzz-secret-7f3a";

const VARIABLES: &[&str] = &[
    "MEMPROXY_ADMIN_KEY",
    "MEMPROXY_ALLOW_UNAUTHENTICATED",
    "MEMPROXY_API_KEYS",
    "MEMPROXY_DATABASE_URL",
    "MEMPROXY_DATA_DIR",
    "MEMPROXY_LISTEN",
    "MEMPROXY_MODE",
    "MEMPROXY_RESPONSES_UPSTREAM_API_KEY",
    "MEMPROXY_RESPONSES_UPSTREAM_URL",
    "MEMPROXY_UPSTREAM_API_KEY",
    "MEMPROXY_UPSTREAM_URL",
];

/// The variables that carry a key (or a URL that may hold a password).
const KEYS: &[&str] = &[
    "MEMPROXY_ADMIN_KEY",
    "MEMPROXY_API_KEYS",
    "MEMPROXY_DATABASE_URL",
    "MEMPROXY_RESPONSES_UPSTREAM_API_KEY",
    "MEMPROXY_UPSTREAM_API_KEY",
];

fn toml_value() -> impl Strategy<Value = toml::Value> {
    let leaf = prop_oneof![
        "\\PC{0,16}".prop_map(toml::Value::String),
        prop::sample::select(vec![
            "implicit",
            "explicit",
            "0.0.0.0:1",
            "127.0.0.1:0",
            "http://x/v1",
            "10s",
            "-1",
            "postgres://u@h/db",
            ""
        ])
        .prop_map(|s| toml::Value::String(s.to_owned())),
        any::<i64>().prop_map(toml::Value::Integer),
        (-10i64..100_000).prop_map(toml::Value::Integer),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(toml::Value::Float),
        any::<bool>().prop_map(toml::Value::Boolean),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(toml::Value::Array),
            prop::collection::vec(("[a-z_]{1,10}", inner), 0..3)
                .prop_map(|pairs| toml::Value::Table(pairs.into_iter().collect())),
        ]
    })
}

/// Every `(table path, key)` place of a TOML document, depth first.
fn places(table: &toml::Table, prefix: &[String], out: &mut Vec<Vec<String>>) {
    for (key, value) in table {
        let mut path = prefix.to_vec();
        path.push(key.clone());
        out.push(path.clone());
        if let toml::Value::Table(inner) = value {
            places(inner, &path, out);
        }
    }
}

fn change(table: &mut toml::Table, path: &[String], value: Option<toml::Value>) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut at = table;
    for key in parents {
        match at.get_mut(key) {
            Some(toml::Value::Table(inner)) => at = inner,
            _ => return,
        }
    }
    match value {
        Some(value) => at.insert(last.clone(), value),
        None => at.remove(last),
    };
}

/// The shipped config file with up to three places changed or removed, or any text.
fn config_text() -> impl Strategy<Value = String> {
    let shipped = std::fs::read_to_string("config/memproxy.toml").unwrap_or_default();
    let changes = prop::collection::vec((any::<usize>(), prop::option::of(toml_value())), 0..4);
    prop_oneof![
        4 => changes.prop_map(move |changes| {
            let mut table: toml::Table = shipped.parse().unwrap_or_default();
            for (at, value) in changes {
                let mut all = Vec::new();
                places(&table, &[], &mut all);
                if let Some(path) = all.get(at % all.len().max(1)).cloned() {
                    change(&mut table, &path, value);
                }
            }
            toml::to_string(&table).unwrap_or_default()
        }),
        1 => "\\PC{0,200}",
        1 => "[\\[\\]a-z_.= \"\\n0-9]{0,120}",
    ]
}

fn environment() -> impl Strategy<Value = Vec<(&'static str, String)>> {
    prop::collection::vec(
        (
            prop::sample::select(VARIABLES),
            prop_oneof![
                "\\PC{0,24}",
                Just(SECRET.to_owned()),
                Just("127.0.0.1:0".to_owned()),
                Just("1".to_owned())
            ],
        ),
        0..4,
    )
}

#[test]
fn config_loading_never_panics_and_never_repeats_a_key() {
    crate::run(
        "config-loading",
        1_500,
        (config_text(), environment()),
        |(text, env)| {
            let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
            let path = dir.path().join("memproxy.toml");
            std::fs::write(&path, &text).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let lookup = |name: &str| env.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone());
            // A key given where a key belongs is never repeated (given as, say, an address, it is
            // just a wrong address and may be quoted).
            let only_as_key = env
                .iter()
                .all(|(name, value)| value != SECRET || KEYS.contains(name));
            match Config::load(Some(&path), &lookup, &Overrides::default()) {
                Ok(config) => {
                    // Not in what the loaded config prints either.
                    let shown = format!("{config:?}");
                    prop_assert!(
                        !only_as_key || !shown.contains(SECRET),
                        "a key is shown in the loaded config"
                    );
                }
                Err(error) => {
                    let message = error.to_string();
                    prop_assert!(!message.is_empty());
                    prop_assert!(
                        !only_as_key || !message.contains(SECRET),
                        "a key in the error: {message}"
                    );
                }
            }
            Ok(())
        },
    );
}
