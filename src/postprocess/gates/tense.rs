//! A fact in the tense the user told it. Small memory LLMs turn "This weekend I stayed home and
//! painted the kitchen blue." into "The user is painting the kitchen blue.": an ongoing action
//! the user had finished, which stays "current" in memory for as long as it is kept. A rewrite,
//! not a refusal: the fact itself is right.

/// `fact` with each "is <verb>ing" / "are <verb>ing" put in the past ("painted") when the user
/// told that verb only in the past: one of `user_texts` has its regular past (`<stem>ed`:
/// painted, baked, moved, stopped) and none has the `-ing` form. `None`: nothing to change.
/// Irregular verbs ("going" / "went") are left as they are.
pub fn as_told(fact: &str, user_texts: &[String]) -> Option<String> {
    let said: Vec<String> = user_texts
        .iter()
        .flat_map(|t| {
            t.split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .map(str::to_lowercase)
                .collect::<Vec<_>>()
        })
        .collect();
    let words: Vec<&str> = fact.split(' ').collect();
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    let mut changed = false;
    let mut index = 0;
    while index < words.len() {
        let word = words[index];
        if let Some(next) = words.get(index + 1) {
            if matches!(word.to_lowercase().as_str(), "is" | "are") {
                if let Some(past) = past_of(next, &said) {
                    out.push(past);
                    changed = true;
                    index += 2;
                    continue;
                }
            }
        }
        out.push(word.to_owned());
        index += 1;
    }
    changed.then(|| out.join(" "))
}

/// The past of the `-ing` word `token` (its trailing punctuation kept) when `said` has it and
/// not the `-ing` form.
fn past_of(token: &str, said: &[String]) -> Option<String> {
    let word = token.trim_end_matches(|c: char| !c.is_alphanumeric());
    let tail = &token[word.len()..];
    let lower = word.to_lowercase();
    let stem = lower.strip_suffix("ing")?;
    if stem.chars().count() < 2 || !word.chars().all(|c| c.is_ascii_alphabetic()) {
        return None;
    }
    let past = format!("{stem}ed");
    (said.contains(&past) && !said.contains(&lower)).then(|| format!("{past}{tail}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(text: &str) -> Vec<String> {
        vec![text.to_owned()]
    }

    #[test]
    fn a_finished_action_stays_in_the_past() {
        let told = said("This weekend I stayed home and painted the kitchen blue.");
        assert_eq!(
            as_told("The user is painting the kitchen blue.", &told).as_deref(),
            Some("The user painted the kitchen blue.")
        );
        assert_eq!(
            as_told(
                "The user and Ben are baking bread",
                &said("Ben and I baked bread")
            )
            .as_deref(),
            Some("The user and Ben baked bread")
        );
        assert_eq!(
            as_told("The user is moving to Porto.", &said("I moved to Porto.")).as_deref(),
            Some("The user moved to Porto.")
        );
    }

    #[test]
    fn what_the_user_told_as_ongoing_or_never_in_the_past_is_kept() {
        let ongoing = said("I painted the hall, and I am painting the kitchen now.");
        assert_eq!(as_told("The user is painting the kitchen.", &ongoing), None);
        assert_eq!(
            as_told(
                "The user is painting the kitchen.",
                &said("I love my kitchen.")
            ),
            None
        );
        // Irregular: no change.
        assert_eq!(
            as_told("The user is going to Porto.", &said("I went to Porto.")),
            None
        );
        assert_eq!(
            as_told("The user is a nurse.", &said("I was a nurse.")),
            None
        );
        assert_eq!(as_told("", &[]), None);
    }
}
