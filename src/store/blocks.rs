//! Core memory blocks, one small area of the store: an agent's own blocks and blocks shared by
//! several agents of one user (an edit by one is in the others' next compiled context).
//!
//! An agent sees its own blocks, then the shared blocks attached to it; a shared block with the
//! label of one of its own takes that block's place while attached (the own block is kept and
//! comes back on detach, so attaching never loses anything). The rules here are pure functions
//! every backend calls.

use serde::{Deserialize, Serialize};

use super::{StoreError, StoreResult, UserScope};

/// The block that holds the client's own system prompt (explicit mode): written by memproxy on
/// every turn, so it can be neither shared nor shadowed by a shared block.
pub const CLIENT_BLOCK: &str = "instructions";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CoreBlock {
    pub label: String,
    pub value: String,
    pub char_limit: i64,
    pub read_only: bool,
    #[serde(default)]
    pub updated_at_ms: i64,
    /// The shared block this is (its name), when it is one: an edit reaches every agent it is
    /// attached to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<String>,
}

/// A block of one user that several of the user's agents can have in core memory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SharedBlock {
    /// Names the block among the user's shared blocks (the label is what agents see).
    pub name: String,
    pub label: String,
    pub value: String,
    pub char_limit: i64,
    pub read_only: bool,
    #[serde(default)]
    pub updated_at_ms: i64,
    /// The agents it is attached to, by name.
    #[serde(default)]
    pub agents: Vec<String>,
}

impl SharedBlock {
    /// The block as an agent it is attached to sees it.
    pub fn as_core(&self) -> CoreBlock {
        CoreBlock {
            label: self.label.clone(),
            value: self.value.clone(),
            char_limit: self.char_limit,
            read_only: self.read_only,
            updated_at_ms: self.updated_at_ms,
            shared: Some(self.name.clone()),
        }
    }
}

/// A label (or shared block name) is 1 to 64 characters.
fn check_name(what: &str, name: &str) -> StoreResult<()> {
    if name.is_empty() || name.chars().count() > 64 {
        return Err(StoreError::Invalid(format!(
            "a block {what} must be 1-64 characters"
        )));
    }
    Ok(())
}

/// A block fits its limit and has a usable label.
pub fn check_block(block: &CoreBlock) -> StoreResult<()> {
    check_name("label", &block.label)?;
    let length = block.value.chars().count() as i64;
    if block.char_limit <= 0 || length > block.char_limit {
        return Err(StoreError::Invalid(format!(
            "block '{}' holds {length} characters, over its limit of {}",
            block.label, block.char_limit
        )));
    }
    Ok(())
}

/// A shared block is a valid block, has a name, and does not take the client block's label.
pub fn check_shared(block: &SharedBlock) -> StoreResult<()> {
    check_name("name", &block.name)?;
    if block.label == CLIENT_BLOCK {
        return Err(StoreError::Invalid(format!(
            "'{CLIENT_BLOCK}' holds the client's system prompt and cannot be shared"
        )));
    }
    check_block(&block.as_core())
}

/// A shared block keeps the label it was created with: agents it is attached to were checked
/// against that label.
pub fn check_update(old: &SharedBlock, new: &SharedBlock) -> StoreResult<()> {
    if old.label != new.label {
        return Err(StoreError::Invalid(format!(
            "shared block '{}' has the label '{}'; a label cannot change (create another block)",
            old.name, old.label
        )));
    }
    Ok(())
}

/// An agent may not have two shared blocks with one label.
pub fn check_attach(attached: &[CoreBlock], block: &SharedBlock) -> StoreResult<()> {
    if let Some(other) = attached
        .iter()
        .filter(|b| b.shared.is_some() && b.label == block.label)
        .find(|b| b.shared.as_deref() != Some(&block.name))
    {
        return Err(StoreError::Invalid(format!(
            "the agent already has the shared block '{}' as '{}'; detach it first",
            other.shared.as_deref().unwrap_or_default(),
            block.label
        )));
    }
    Ok(())
}

/// What an agent sees: its own blocks in order, each replaced by an attached shared block of its
/// label, then the other attached blocks in the order they were attached.
pub fn merge(own: Vec<CoreBlock>, mut attached: Vec<CoreBlock>) -> Vec<CoreBlock> {
    let mut blocks = Vec::with_capacity(own.len() + attached.len());
    for block in own {
        match attached.iter().position(|a| a.label == block.label) {
            Some(index) => blocks.push(attached.remove(index)),
            None => blocks.push(block),
        }
    }
    blocks.extend(attached);
    blocks
}

/// Shared core-memory blocks of a user's agents.
pub trait SharedBlocks {
    /// The user's shared blocks, by name, each with the agents it is attached to.
    fn shared_blocks(&self, scope: &UserScope) -> StoreResult<Vec<SharedBlock>>;
    /// Creates or updates a shared block (its `agents` are ignored); an update reaches the next
    /// context of every agent it is attached to.
    fn put_shared_block(&self, scope: &UserScope, block: &SharedBlock) -> StoreResult<()>;
    /// Deletes it, detaching it from every agent (whose own blocks of that label come back).
    /// Returns whether it existed.
    fn delete_shared_block(&self, scope: &UserScope, name: &str) -> StoreResult<bool>;
    /// Attaches it to the agent, created with `starting` blocks on first use. `NotFound`: no such
    /// shared block; `Invalid`: the agent has another shared block with its label.
    fn attach_shared_block(
        &self,
        scope: &UserScope,
        agent: &str,
        name: &str,
        starting: &[CoreBlock],
    ) -> StoreResult<()>;
    /// Returns whether it was attached.
    fn detach_shared_block(&self, scope: &UserScope, agent: &str, name: &str) -> StoreResult<bool>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(label: &str, shared: Option<&str>) -> CoreBlock {
        CoreBlock {
            label: label.to_owned(),
            value: format!("{label} {shared:?}"),
            char_limit: 100,
            read_only: false,
            updated_at_ms: 0,
            shared: shared.map(str::to_owned),
        }
    }

    #[test]
    fn a_shared_block_takes_the_place_of_the_own_block_with_its_label() {
        let own = vec![block("persona", None), block("human", None)];
        let attached = vec![block("team", Some("t")), block("human", Some("h"))];
        let merged = merge(own, attached);
        let seen: Vec<(&str, Option<&str>)> = merged
            .iter()
            .map(|b| (b.label.as_str(), b.shared.as_deref()))
            .collect();
        assert_eq!(
            seen,
            [("persona", None), ("human", Some("h")), ("team", Some("t"))]
        );
    }

    proptest::proptest! {
        /// Whatever the labels: every attached block is seen once, an own block is seen unless an
        /// attached one has its label, and no label is seen twice.
        #[test]
        fn merge_shows_each_block_once(
            own in proptest::collection::btree_set("[a-d]", 0..4),
            attached in proptest::collection::btree_set("[a-f]", 0..4),
        ) {
            let own_blocks: Vec<CoreBlock> = own.iter().map(|l| block(l, None)).collect();
            let attached_blocks: Vec<CoreBlock> =
                attached.iter().map(|l| block(l, Some("s"))).collect();
            let merged = merge(own_blocks, attached_blocks);
            let mut labels: Vec<&str> = merged.iter().map(|b| b.label.as_str()).collect();
            labels.sort();
            labels.dedup();
            proptest::prop_assert_eq!(labels.len(), merged.len());
            for label in &attached {
                proptest::prop_assert!(merged.iter().any(|b| &b.label == label && b.shared.is_some()));
            }
            for label in own.difference(&attached) {
                proptest::prop_assert!(merged.iter().any(|b| &b.label == label && b.shared.is_none()));
            }
        }
    }

    #[test]
    fn the_client_block_and_a_second_shared_label_are_refused() {
        let mut shared = SharedBlock {
            name: "n".into(),
            label: CLIENT_BLOCK.into(),
            value: String::new(),
            char_limit: 10,
            read_only: false,
            updated_at_ms: 0,
            agents: vec![],
        };
        assert!(check_shared(&shared).is_err());
        shared.label = "human".into();
        assert!(check_shared(&shared).is_ok());
        assert!(check_attach(&[block("human", Some("other"))], &shared).is_err());
        assert!(check_attach(&[block("human", Some("n"))], &shared).is_ok());
        assert!(check_attach(&[block("human", None)], &shared).is_ok());
        shared.value = "x".repeat(11);
        assert!(check_shared(&shared).is_err());
    }
}
