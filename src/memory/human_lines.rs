//! A user's facts as lines of their agents' `human` blocks (one memory under every mode): when a
//! fact is rewritten or retired (the management API, the console, MCP, implicit mode's
//! reconciliation), every agent's `human` line that says exactly the old text says the new one
//! or goes. An agent then never keeps, in the core memory it sees on every turn, what the user
//! corrected or deleted elsewhere. The other direction (a line an agent writes becomes a fact) is
//! the agent's side, `agent::one_memory`.

use crate::store::{Store, StoreResult, UserScope};

/// The label of the block that holds what an agent knows about the user.
pub const HUMAN: &str = "human";

/// Rewrites (`new: Some`) or removes (`None`) the line `old` in every `human` block of the user's
/// agents; returns how many blocks changed. A read-only block is left as it is (an operator
/// wrote it), as is a block without that exact line.
pub fn follow(
    store: &dyn Store,
    scope: &UserScope,
    old: &str,
    new: Option<&str>,
) -> StoreResult<usize> {
    let old = old.trim();
    if old.is_empty() || new.is_some_and(|new| new.trim() == old) {
        return Ok(0);
    }
    let mut changed = 0;
    for agent in store.list_agents(scope)? {
        let edited = store.edit_core_block(scope, &agent.name, HUMAN, &mut |block| {
            if block.read_only {
                return Err("read-only".to_owned());
            }
            followed(&block.value, old, new).ok_or_else(|| "no such line".to_owned())
        })?;
        if matches!(edited, Ok(Ok(_))) {
            changed += 1;
        }
    }
    Ok(changed)
}

/// `value` with its lines equal to `old` (surrounding space aside) made `new` or dropped; `None`
/// when no line is.
pub fn followed(value: &str, old: &str, new: Option<&str>) -> Option<String> {
    let old = old.trim();
    if !value.lines().any(|line| line.trim() == old) {
        return None;
    }
    let lines: Vec<&str> = value
        .lines()
        .filter_map(|line| match (line.trim() == old, new) {
            (false, _) => Some(line),
            (true, Some(new)) => Some(new.trim()),
            (true, None) => None,
        })
        .collect();
    Some(lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::followed;

    #[test]
    fn only_a_whole_equal_line_follows_the_fact() {
        let block = "The user lives in Lisbon.\nThe user has a dog named Pixel.";
        assert_eq!(
            followed(
                block,
                "The user lives in Lisbon.",
                Some("The user lives in Porto.")
            ),
            Some("The user lives in Porto.\nThe user has a dog named Pixel.".to_owned())
        );
        assert_eq!(
            followed(block, " The user has a dog named Pixel. ", None),
            Some("The user lives in Lisbon.".to_owned())
        );
        // Part of a line is another fact: left alone.
        assert_eq!(followed(block, "The user lives in", None), None);
    }
}
