//! Language-dependent rules behind one interface, on the ground floor: the word forms the memory
//! gates compare. Each rule a language needs is a method of [`Language`]; the English
//! implementation is `english::English`, one place, and its stemmer is Snowball's (the `rust-stemmers`
//! crate), not hand-written suffix rules, and its word lists are `english/words.rs`. The gates
//! reach them through [`current`]: another language is another implementation, not an edit of
//! the gates. The lists of the single gates (`postprocess::gates::*`) are
//! here too, each field named after its gate (`subject_leading` is `gates::subject`'s).

mod compare;
mod english;

pub use compare::{content_words, names_of_others, only_adds_to};

use english::English;

/// What the text rules need to know of a language.
pub trait Language: Send + Sync {
    /// A word's stem, so that its inflections meet ("plays", "played" and "playing" → "play");
    /// the word is given lower-cased.
    fn stem(&self, word: &str) -> String;
    /// The word lists the memory gates read.
    fn words(&self) -> &'static WordLists;
}

/// The word lists a language gives the memory gates (`postprocess::gates`): each names words or
/// phrases by what they do in a sentence, so a gate reads the list, not the language.
pub struct WordLists {
    /// What makes a statement about the assistant a commitment ("will", "remind").
    pub promises: &'static [&'static str],
    /// How a model restates a question as a fact ("asked about").
    pub reported_questions: &'static [&'static str],
    /// How a fact says the user is interested in something.
    pub interests: &'static [&'static str],
    /// The single words of those.
    pub interest_words: &'static [&'static str],
    /// Thanks and greetings: manners, not facts.
    pub courtesy: &'static [&'static str],
    /// Words of saying ("said", "express") that carry no fact.
    pub saying: &'static [&'static str],
    /// A time that passes with the conversation ("tonight").
    pub passing: &'static [&'static str],
    /// Wondering aloud ("might", "thinking about").
    pub musings: &'static [&'static str],
    /// Claims only the user may make of themselves (health, faith and the like).
    pub sensitive: &'static [&'static str],
    /// Claims a model reads into what the user said, each with the words the user must have used.
    pub readings: &'static [(&'static [&'static str], &'static [&'static str])],
    /// Words that carry no content of their own, and the words naming the two sides.
    pub stop_words: &'static [&'static str],
    /// Words that open a greeting or thanks, before the name ("Hey Mel!", "Thank you, Mel.").
    pub addressed_openers: &'static [&'static str],
    /// Capitalised words after an opener that are no name ("Hi There!", "Thanks So much").
    pub addressed_not_names: &'static [&'static str],
    /// Words that join a statement onto a question.
    pub asked_joins: &'static [&'static str],
    /// Words that open a clause about the user.
    pub asked_first_person: &'static [&'static str],
    /// Relative times and the days they can mean, counted from the day they were said (UTC: a
    /// user's "yesterday" late at night can be two days back).
    pub dates_relative: &'static [(&'static str, i64, i64)],
    /// Words that open a date phrase, and what may stand between them and the date.
    pub dates_openers: &'static [&'static str],
    /// Words that may stand between a date phrase's opener and the date ("early", "mid").
    pub dates_modifiers: &'static [&'static str],
    /// Phrases that make a text a deadline.
    pub deadline_due: &'static [&'static str],
    /// Stems of the words of a deadline and its change, and of who may change it: they say nothing
    /// of what it is for.
    pub deadline_moving: &'static [&'static str],
    /// Someone else's deadline is not the user's (stems of content words).
    pub deadline_others: &'static [&'static str],
    /// What a model writes for "no fact" ("none", "unknown", "fact").
    pub form_placeholders: &'static [&'static str],
    /// Phrases that only instructions to a model contain.
    pub instruction_phrases: &'static [&'static str],
    /// Role labels and chat-template tokens a text may open with to pass as another message.
    pub instruction_openings: &'static [&'static str],
    /// Verbs that ask to wipe memory ("delete", "forget").
    pub instruction_wipe_verbs: &'static [&'static str],
    /// What a wipe names ("memories", "everything").
    pub instruction_memory_nouns: &'static [&'static str],
    /// Words that make a wipe total ("all", "every").
    pub instruction_quantifiers: &'static [&'static str],
    /// How an assistant promises something in the first person (lower case, straight apostrophes).
    pub promise_first_person: &'static [&'static str],
    /// Words that say a commitment was made, not what it is about.
    pub promise_commitment_words: &'static [&'static str],
    /// Facts of which a user has one at a time: where they live, where they work, their job.
    pub relation_relations: &'static [(&'static str, &'static [&'static str])],
    /// Phrases that say a relation ended, and which relations they may end.
    pub relation_endings: &'static [(&'static str, &'static [&'static str])],
    /// "is a nurse at St Mary's": a job and a workplace, when an "at" or "for" follows.
    pub relation_role_verbs: &'static [&'static str],
    /// "is a regular at Casa Mia" is no job.
    pub relation_not_roles: &'static [&'static str],
    /// Words that make a relation one of several ("also works at"), or not the present one.
    pub relation_not_exclusive: &'static [&'static str],
    /// Words dropped before reading a claim: they date it, they do not change it.
    pub relation_adverbs: &'static [&'static str],
    /// Words after which the rest of a sentence is another clause.
    pub relation_clause_breaks: &'static [&'static str],
    /// A subject with one of these is a clause about the fact, not the fact ("the user thinks Ana").
    pub relation_not_subjects: &'static [&'static str],
    /// Past tenses that do not end in "-ed".
    pub relative_irregular_past: &'static [&'static str],
    /// Words that make a fact a plan or a habit, or point past its verb to a time to come
    /// ("promised to remind … on Friday"), whatever else it says.
    pub relative_not_past: &'static [&'static str],
    /// Words that may open a clause before its subject.
    pub subject_leading: &'static [&'static str],
    /// Words that end a clause (the next one has its own subject, or the same one unsaid).
    pub subject_joins: &'static [&'static str],
    /// Pronouns of another person or thing ("he", "she", "they", "it").
    pub subject_others: &'static [&'static str],
    /// Pronouns that leave a fact without a referent when nothing else names it.
    pub subject_bare: &'static [&'static str],
    /// Openings of a statement about no one.
    pub subject_impersonal: &'static [&'static str],
    /// Words of doing, promising or stressing that say nothing of what was done ("The assistant
    /// promised to do exactly that."); plain words, stemmed by the gate like the fact's words.
    pub subject_fillers: &'static [&'static str],
    /// Pronouns for a person, who must be named somewhere in the fact.
    pub subject_personal: &'static [&'static str],
    /// Nouns for a person a pronoun may refer to (a trailing "s" aside; "grandparents" and
    /// "stepmother" end in one).
    pub subject_people: &'static [&'static str],
    /// Words that make a fact a change or a denial, never a vaguer variant of another ("The user no
    /// longer works at Fabrikam." beside "The user works at Fabrikam as a data analyst.").
    pub vaguer_changes: &'static [&'static str],
    /// Phrases that address what the assistant said or did (lowercase, matched as whole words).
    pub cues: &'static [&'static str],
    /// Words and phrases that ask about how things were (matched as whole words, lowercase).
    pub history_past_cues: &'static [&'static str],
    /// Words after which a verb keeps its base form ("do I live", "will I go"), and which are not
    /// conjugated themselves.
    pub perspective_auxiliaries: &'static [&'static str],
    /// Words that often follow "I" and are not verbs to conjugate.
    pub perspective_not_verbs: &'static [&'static str],
    /// Properties every person has, and words too general to check: often told without the word.
    pub unmentioned_attributes: &'static [&'static str],
    /// Words that may stand between "my" and the thing ("my new car", "my older brother").
    pub unmentioned_modifiers: &'static [&'static str],
    /// Words after "my" that end the phrase without a thing: verbs and function words.
    pub unmentioned_not_things: &'static [&'static str],
    /// Things that other words mention: (thing asked, the words that count).
    pub unmentioned_kinds: &'static [(&'static str, &'static [&'static str])],
    /// Words that open a question asking for something (a question that `yes` or `no` answers
    /// may be answered in its own words: "Do I eat meat?" "No, you don't eat meat.").
    pub unusable_asking: &'static [&'static str],
    /// Words a reply wraps a question in, which answer nothing.
    pub unusable_framing: &'static [&'static str],
    /// Words that say no, or that the answer is not known: a reply with one says something.
    pub unusable_negations: &'static [&'static str],
    /// Words that only date a fact ("in October 2026", "on March 2", "last week").
    /// (Weekdays and months are [`crate::dates`]' lists.)
    pub gates_date_words: &'static [&'static str],
    /// Words whose presence flips a statement: a fact is contained in another only with the same ones.
    pub consolidate_negations: &'static [&'static str],
    /// Words too common to help a keyword search (they would match nearly every row).
    pub keywords_stopwords: &'static [&'static str],
    /// Words that say whose someone is, before the noun and the name ("my brother Tomas").
    pub names_owners: &'static [&'static str],
    /// Words that give a name ("a cat named Mochi").
    pub names_naming: &'static [&'static str],
}

/// The word lists of the language the rules read ([`current`]'s).
pub fn words() -> &'static WordLists {
    current().words()
}

/// The language the gates read: English until a second implementation and a way to choose it
/// exist.
pub fn current() -> &'static dyn Language {
    &English
}

/// The language whose rules read `text`, or `None` for text in a language this module has no
/// rules for: the text rules then leave it alone, and only the mechanisms that read no words
/// judge it (where it is found in the user's turns, question marks, numbers, whom it names, the
/// memory LLM's own answers). The language is told by a trigram model (the `whatlang` crate):
/// text it places reliably in another language is that language's, unless a fifth of its words
/// are the implementation's own function words (a trigram model can take a short English line
/// with a foreign name or food for French or Italian; no sentence of another language is made of
/// English function words). Text it cannot place reliably, a short line mostly, is read as
/// English, as before there was a choice: so a short line in another language still meets the
/// English rules; give the reader more of it (a conversation's user turns together) to tell.
pub fn of(text: &str) -> Option<&'static dyn Language> {
    let english: &'static dyn Language = &English;
    match whatlang::detect(text) {
        Some(info) if info.is_reliable() && info.lang() != whatlang::Lang::Eng => {
            (function_word_share(english, text) >= OWN_FUNCTION_WORDS).then_some(english)
        }
        _ => Some(english),
    }
}

/// The share of a text's function words at which it is the language's own, whatever else it
/// looks like.
const OWN_FUNCTION_WORDS: f64 = 0.2;

/// The share of `text`'s words that are `language`'s function words.
fn function_word_share(language: &dyn Language, text: &str) -> f64 {
    let stop = language.words().stop_words;
    let words: Vec<String> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    let own = words.iter().filter(|w| stop.contains(&w.as_str())).count();
    own as f64 / words.len().max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::of;

    #[test]
    fn english_is_read_by_the_english_rules_other_languages_by_none() {
        for text in [
            "I'm lactose intolerant myself, so no pizza place.",
            "Chiara loves climbing.",
            "Helga turns 60 next month.",
            // Lines a trigram model alone places in French, Afrikaans and Italian.
            "Absolutely, let's do that! Can't wait for our coffee date next week. See you then. Stay safe!",
            "Wow, John! Way to go helping veterans! I'm doing my part too, volunteering at a homeless shelter. It's so rewarding.",
            "I like also cheese pizza and prosciutto.",
        ] {
            assert!(of(text).is_some(), "{text}");
        }
        for text in [
            "Ich wohne seit März in Leipzig und arbeite als Krankenpflegerin im Klinikum. Meine Schwester Lena ist 34.",
            "Mi hermana Lucía vive en Sevilla y tiene dos gatos. Yo soy vegetariana desde hace un año.",
        ] {
            assert!(of(text).is_none(), "{text}");
        }
        // Too short to tell: the English rules, as before.
        assert!(of("Vivo en Madrid.").is_some());
    }
}
