//! Grounding: every fact drawn from a chat is tied to the message and the words that state it.
//!
//! The memory LLM names, with each fact, the words it took it from (`quote`), how those words
//! were said (a statement, a question or a request) and whom the fact is about. None of that is
//! trusted as given: the quote is looked up in the turns, and where it is not found (or not
//! given) the user's sentence that shares the most of the fact's words stands in for it. A fact
//! is kept as the user's only when its source is the user's own statement:
//! - words found only in an assistant line are the assistant's (its suggestion, its answer), not
//!   the user's, unless the fact is the assistant's own commitment;
//! - a clause that ends in a question mark, or words the model itself calls a question or a
//!   request, state no fact;
//! - every name and number in the fact must be in the user's words (a place only the assistant
//!   named, or a city copied from the prompt's example, is no fact of the user's);
//! - a fact about someone else must name them: "The user is 71." about the user's teacher gives
//!   the teacher's age to the user.
//!
//! These rules read punctuation, capitals and digits, not words of one language.

/// How the source words were said, as the model classified them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaidAs {
    Statement,
    Question,
    Request,
}

impl SaidAs {
    pub fn parse(text: &str) -> Option<SaidAs> {
        match text.trim().to_lowercase().as_str() {
            "statement" => Some(SaidAs::Statement),
            "question" => Some(SaidAs::Question),
            "request" => Some(SaidAs::Request),
            _ => None,
        }
    }
}

/// One turn the facts may come from.
#[derive(Clone, Copy, Debug)]
pub struct Said<'a> {
    pub role: &'a str,
    pub text: &'a str,
}

/// Where a fact comes from: the turn, and the words in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grounded {
    /// The index of the turn in the turns grounded against.
    pub turn: usize,
    pub quote: String,
    /// Names and numbers of the fact in none of the user's words of these turns: they must be
    /// in what is already known about the user ([`Grounded::unsaid_check`]), or the fact is no
    /// fact of the user's.
    pub unsaid: Vec<String>,
    /// One of `unsaid` is in an assistant line.
    pub unsaid_from_assistant: bool,
    /// Whom the fact is about ([`subject_of`]).
    pub subject: Option<String>,
}

impl Grounded {
    /// Whether the names and numbers no turn gave are in `known` (what is already stored about
    /// the user: "The user's sister Zelda …" may name her from an earlier chat).
    pub fn unsaid_check(&self, known: &[&str]) -> Result<(), Ungrounded> {
        let known: String = known.iter().map(|k| padded(k)).collect();
        match self
            .unsaid
            .iter()
            .any(|name| !known.contains(&format!(" {} ", name.to_lowercase())))
        {
            false => Ok(()),
            true if self.unsaid_from_assistant => Err(Ungrounded::AssistantsWords),
            true => Err(Ungrounded::NameNotSaid),
        }
    }
}

/// Why a fact has no source in the user's own statements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ungrounded {
    /// Its words are the assistant's (found in an assistant line, in no user line).
    AssistantsWords,
    /// Its source is a question or a request.
    Asked,
    /// A name or number in it is in none of the user's words.
    NameNotSaid,
    /// About another person, but it does not name them.
    WrongSubject,
    /// No user sentence states it.
    NoSource,
}

/// The fact as the model wrote it, with what it said of its source.
pub struct Claim<'a> {
    pub text: &'a str,
    pub quote: Option<&'a str>,
    pub said_as: Option<SaidAs>,
    /// "user", "assistant", or the other person's name or relation.
    pub about: Option<&'a str>,
    /// The fact is a commitment of the assistant's (its source is the assistant's line).
    pub commitment: bool,
}

/// Lower-case words (letters and digits) of a text.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Whom a fact is about, from the extraction's `about`: a commitment is the assistant's; "user"
/// and "assistant" are the schema's own words for the two speakers (with or without an article);
/// anything else is the name of the person or pet given, as given. `None` when no one was named.
pub fn subject(about: Option<&str>, commitment: bool) -> Option<String> {
    if commitment {
        return Some("assistant".to_owned());
    }
    let about = about?.trim();
    let named = words(about);
    match named.last().map(String::as_str) {
        None => None,
        Some(speaker @ ("user" | "assistant")) if named.len() <= 2 => Some(speaker.to_owned()),
        Some(_) => Some(about.to_owned()),
    }
}

/// Whom a grounded fact is about: as [`subject`] reads the extraction's `about`, except for a
/// fact said to be the user's that never names the user (the prompt has facts about the user say
/// "the user", its own word). Such a fact is about the person it opens with: the run of opening
/// words that the user's own messages write as a name (capitalised past the opening of a
/// sentence, `names`): "Helga turns 60 next month." from "My mum Helga turns 60 next month" is
/// Helga's, whatever the model said. Opening with anything else ("The head chef is …"), it is
/// about no one known (`None`): a name further on may be a place or an object. A small model
/// names "user" for almost every fact, so the fact's own words decide.
pub fn subject_of(claim: &Claim<'_>, names: &[&str]) -> Option<String> {
    let given = subject(claim.about, claim.commitment);
    if given.as_deref() != Some("user") || words(claim.text).iter().any(|w| w == "user") {
        return given;
    }
    let run: Vec<&str> = claim
        .text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .take_while(|w| names.contains(w))
        .collect();
    (!run.is_empty()).then(|| run.join(" "))
}

/// The words of `text` joined by single spaces, padded, for whole-word containment.
fn padded(text: &str) -> String {
    format!(" {} ", words(text).join(" "))
}

/// The byte range of `quote` in `text`, compared word by word ignoring case and punctuation.
fn locate(text: &str, quote: &str) -> Option<(usize, usize)> {
    let wanted = words(quote);
    if wanted.is_empty() {
        return None;
    }
    let spans: Vec<(usize, &str)> = text
        .split(|c: char| !c.is_alphanumeric())
        .scan(0usize, |offset, piece| {
            let start = *offset;
            *offset += piece.len() + 1;
            Some((start, piece))
        })
        .filter(|(_, piece)| !piece.is_empty())
        .collect();
    spans.windows(wanted.len()).find_map(|window| {
        window
            .iter()
            .zip(&wanted)
            .all(|((_, piece), want)| piece.to_lowercase() == *want)
            .then(|| {
                let (first, _) = window[0];
                let (last, piece) = window[window.len() - 1];
                (first, last + piece.len())
            })
    })
}

/// Whether the clause holding `text[..end]` ends in a question mark: the words up to the next
/// clause mark (`, ; . ! ?` and their full-width forms).
fn clause_asks(text: &str, end: usize) -> bool {
    text[end..]
        .chars()
        .find(|c| crate::text::CLAUSE_MARKS.contains(c))
        .is_some_and(crate::text::is_question_mark)
}

/// The sentences of a text, each with its end mark (split after `. ! ?`, their full-width forms
/// and line breaks).
pub(super) fn sentences(text: &str) -> impl Iterator<Item = &str> {
    text.split_inclusive(['.', '!', '?', '\n', '。', '？', '！'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// Names and numbers in a fact: words with a capital that do not open a sentence (with
/// `capitals`: where the language keeps capitals for names; German gives every noun one), and
/// words with a digit. A sentence's opening words are its subject as the system writes it ("The user",
/// "Der Nutzer", where a language capitalises nouns): the first word, and the second when the
/// first has a capital too. Words of a date the system wrote itself (a relative day resolved to "March 27, 2026")
/// are left out: `date_word` names its month and weekday words, and numbers beside one of them,
/// or years, belong to it.
pub(super) fn names_and_numbers<'a>(
    text: &'a str,
    date_word: &dyn Fn(&str) -> bool,
    capitals: bool,
) -> Vec<&'a str> {
    let mut out = Vec::new();
    for sentence in sentences(text) {
        let pieces: Vec<&str> = sentence
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .collect();
        for (index, word) in pieces.iter().enumerate() {
            let capital = word.chars().next().is_some_and(char::is_uppercase);
            let digit = word.chars().any(|c| c.is_ascii_digit());
            let opening = index == 0
                || (index == 1 && pieces[0].chars().next().is_some_and(char::is_uppercase));
            if !((capitals && capital && !opening) || digit) || date_word(word) {
                continue;
            }
            let beside_date = |offset: isize| {
                index
                    .checked_add_signed(offset)
                    .and_then(|i| pieces.get(i))
                    .is_some_and(|w| date_word(w))
            };
            let year = word
                .parse::<u32>()
                .is_ok_and(|y| (1900..=2100).contains(&y));
            if digit && (year || beside_date(-1) || beside_date(1)) {
                continue;
            }
            out.push(*word);
        }
    }
    out
}

/// Checks a claim against the turns: its source in the user's statements, or why there is none.
/// `date_word` names the words of the dates the system writes (see [`names_and_numbers`]); a
/// capital is read as a name only with `capitals` (the text rules read the user's language:
/// [`super::gates::Evidence::has_rules`]).
pub fn ground(
    claim: &Claim<'_>,
    turns: &[Said<'_>],
    date_word: &dyn Fn(&str) -> bool,
    capitals: bool,
) -> Result<Grounded, Ungrounded> {
    let source_role = if claim.commitment {
        "assistant"
    } else {
        "user"
    };
    // (turn, the words in it)
    let mut found: Option<(usize, String)> = None;
    if let Some(quote) = claim.quote.filter(|q| !words(q).is_empty()) {
        for (index, turn) in turns.iter().enumerate() {
            let Some((start, end)) = locate(turn.text, quote) else {
                continue;
            };
            if turn.role != source_role {
                continue;
            }
            if clause_asks(turn.text, end) {
                return Err(Ungrounded::Asked);
            }
            found = Some((index, turn.text[start..end].to_owned()));
            break;
        }
        if found.is_none()
            && !claim.commitment
            && turns
                .iter()
                .any(|t| t.role == "assistant" && locate(t.text, quote).is_some())
        {
            // The assistant's line may repeat what the user said ("so I can start flying lessons
            // in May" answered "I'll start flying lessons in May"): a statement of the user's
            // that holds as much of the fact as the quoted line is its source. One that holds
            // less (the user's "a weekend away" beside the assistant's "a weekend in the
            // mountains") is not.
            let quoted = shared(quote, claim.text);
            match best_sentence(claim.text, turns, source_role) {
                Some((turn, sentence, false)) if shared(&sentence, claim.text) >= quoted => {
                    found = Some((turn, sentence));
                }
                _ => return Err(Ungrounded::AssistantsWords),
            }
        }
    }
    if matches!(claim.said_as, Some(SaidAs::Question | SaidAs::Request)) && !claim.commitment {
        return Err(Ungrounded::Asked);
    }
    let spoken: String = turns
        .iter()
        .filter(|t| t.role == source_role)
        .map(|t| padded(t.text))
        .collect();
    let unsaid: Vec<String> = names_and_numbers(claim.text, date_word, capitals)
        .into_iter()
        .filter(|name| !spoken.contains(&format!(" {} ", name.to_lowercase())))
        .map(str::to_owned)
        .collect();
    let assistants: String = turns
        .iter()
        .filter(|t| t.role == "assistant")
        .map(|t| padded(t.text))
        .collect();
    let unsaid_from_assistant = !claim.commitment
        && unsaid
            .iter()
            .any(|name| assistants.contains(&format!(" {} ", name.to_lowercase())));
    if let Some(about) = claim.about {
        let about_words = words(about);
        let own = matches!(about_words.as_slice(), [w] if w == "user" || w == "assistant");
        let fact = padded(claim.text);
        if !own
            && !about_words.is_empty()
            && !about_words.iter().any(|w| fact.contains(&format!(" {w} ")))
        {
            return Err(Ungrounded::WrongSubject);
        }
    }
    let (turn, quote) = match found {
        Some(found) => found,
        None => match best_sentence(claim.text, turns, source_role) {
            Some((_, _, true)) => return Err(Ungrounded::Asked),
            Some((turn, quote, false)) => (turn, quote),
            None if unsaid_from_assistant => return Err(Ungrounded::AssistantsWords),
            None => return Err(Ungrounded::NoSource),
        },
    };
    let names: Vec<&str> = turns
        .iter()
        .filter(|t| t.role == "user")
        .flat_map(|t| names_and_numbers(t.text, date_word, capitals))
        .filter(|w| !w.chars().any(|c| c.is_ascii_digit()))
        .collect();
    Ok(Grounded {
        turn,
        quote,
        unsaid,
        unsaid_from_assistant,
        subject: subject_of(claim, &names),
    })
}

/// The sentence of `role` that shares the most of the fact's words (its turn's index, the
/// sentence, and whether it is a question):
/// the source when the model named none that could be found (whether the fact is grounded
/// enough is the gates' question; this only finds where it comes from). Words are compared by their first four
/// letters ("lives" and "live"), short words (articles, pronouns and the like in most languages)
/// are left out, and numbers count.
fn best_sentence(text: &str, turns: &[Said<'_>], role: &str) -> Option<(usize, String, bool)> {
    let fact = significant(text);
    // (words shared, turn, sentence, a question)
    let mut best: Option<(usize, usize, &str, bool)> = None;
    for (index, turn) in turns.iter().enumerate().filter(|(_, t)| t.role == role) {
        for sentence in sentences(turn.text) {
            let asks = sentence.ends_with('?') || sentence.ends_with('？');
            let shared = significant(sentence).intersection(&fact).count();
            if shared >= 1 && best.is_none_or(|(most, ..)| shared > most) {
                best = Some((shared, index, sentence, asks));
            }
        }
    }
    best.map(|(_, turn, sentence, asks)| (turn, sentence.to_owned(), asks))
}

/// The words [`best_sentence`] compares: by their first four letters ("lives" and "live"),
/// without short words (articles, pronouns and the like in most languages), numbers kept.
fn significant(text: &str) -> std::collections::HashSet<String> {
    words(text)
        .into_iter()
        .filter(|w| w.chars().count() > 3 || w.chars().any(|c| c.is_ascii_digit()))
        .map(|w| w.chars().take(4).collect())
        .collect()
}

/// How many of the fact's words ([`significant`]) `text` holds.
fn shared(text: &str, fact: &str) -> usize {
    significant(text).intersection(&significant(fact)).count()
}

#[cfg(test)]
#[path = "grounding_tests.rs"]
mod tests;
