//! A date something is due by is a fact of which there is one at a time too: "The deadline for
//! the thesis is October 15." is no longer true once "My supervisor extended my deadline to
//! November 30." The newer of two such facts retires the older when both name a deadline with a
//! date, the dates differ, and they are about the same thing: what each says the deadline is for
//! (its words beyond the date, the deadline and who moved it) is the same, or one says nothing
//! of it. A deadline of someone else's, or of two named things ("the tax return", "the thesis"),
//! retires nothing. Pure: both modes call it through [`super::supersedes`].

use std::collections::HashSet;

use super::{content_words, without_dates};

/// What a deadline text says: its date words and what it is for.
struct Deadline {
    date: HashSet<String>,
    about: HashSet<String>,
}

fn deadline(text: &str) -> Option<Deadline> {
    let lower = text.to_lowercase();
    if !super::lists()
        .deadline_due
        .iter()
        .any(|d| lower.contains(d))
    {
        return None;
    }
    let words = content_words(text);
    // The list's words are compared as the fact's are read: stemmed ("colleague" → "colleagu").
    if words.iter().any(|w| {
        super::lists()
            .deadline_others
            .iter()
            .any(|o| w.starts_with(&super::stem(o)))
    }) {
        return None;
    }
    let undated = without_dates(words.clone());
    let date: HashSet<String> = words.difference(&undated).cloned().collect();
    if date.is_empty() {
        return None;
    }
    let about = undated
        .into_iter()
        .filter(|w| {
            !super::lists()
                .deadline_moving
                .iter()
                .any(|m| w.starts_with(m))
        })
        .collect();
    Some(Deadline { date, about })
}

/// Whether the newer `new` moves the deadline the older `old` states.
pub(super) fn moves(new: &str, old: &str) -> bool {
    let (Some(new), Some(old)) = (deadline(new), deadline(old)) else {
        return false;
    };
    new.date != old.date
        && !new.date.is_subset(&old.date)
        && (new.about.is_subset(&old.about) || old.about.is_subset(&new.about))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moved_deadline_retires_the_old_one_of_the_same_thing() {
        let old = "The deadline for the user's thesis is October 15.";
        assert!(moves(
            "The user's supervisor extended their deadline to November 30.",
            old
        ));
        assert!(moves("The user's thesis is now due on November 30.", old));
        assert!(moves(
            "The user's thesis deadline was moved to November 30, 2026.",
            "The user's thesis deadline is October 15, 2026."
        ));
        // Not itself, not the same date again, not a deadline of another thing or person.
        assert!(!moves(old, old));
        assert!(!moves("The thesis deadline is still October 15.", old));
        assert!(!moves("The user's tax return is due on April 30.", old));
        assert!(!moves("The user's sister's deadline is May 1.", old));
        // Another's deadline, beside one that says nothing of what it is for.
        let bare = "The deadline is October 15.";
        assert!(!moves("My sister's deadline is June 30.", bare));
        assert!(!moves("My colleague's deadline is June 30.", bare));
        // No date: nothing to compare.
        assert!(!moves("The user is worried about the deadline.", old));
        assert!(!moves("The user moved to Porto in November.", old));
    }
}
