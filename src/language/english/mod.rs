//! English: Snowball's English (Porter 2) stemmer, and the word lists the gates read.

mod gate_words;
mod rule_words;
mod words;

use rust_stemmers::{Algorithm, Stemmer};

use super::interface::{Language, WordLists};

/// English's lists, in one place ([`words`]).
static WORDS: WordLists = WordLists {
    promises: &words::PROMISES,
    reported_questions: &words::REPORTED_QUESTIONS,
    interests: &words::INTERESTS,
    interest_words: &words::INTEREST_WORDS,
    courtesy: &words::COURTESY,
    saying: &words::SAYING,
    passing: &words::PASSING,
    musings: &words::MUSINGS,
    sensitive: &words::SENSITIVE,
    readings: &words::READINGS,
    stop_words: &words::STOP_WORDS,
    addressed_openers: &gate_words::ADDRESSED_OPENERS,
    addressed_not_names: &gate_words::ADDRESSED_NOT_NAMES,
    asked_joins: &gate_words::ASKED_JOINS,
    asked_first_person: &gate_words::ASKED_FIRST_PERSON,
    dates_relative: &gate_words::DATES_RELATIVE,
    dates_openers: &gate_words::DATES_OPENERS,
    dates_modifiers: &gate_words::DATES_MODIFIERS,
    deadline_due: &gate_words::DEADLINE_DUE,
    deadline_moving: &gate_words::DEADLINE_MOVING,
    deadline_others: &gate_words::DEADLINE_OTHERS,
    form_placeholders: &gate_words::FORM_PLACEHOLDERS,
    instruction_phrases: &gate_words::INSTRUCTION_PHRASES,
    instruction_openings: &gate_words::INSTRUCTION_OPENINGS,
    instruction_wipe_verbs: &gate_words::INSTRUCTION_WIPE_VERBS,
    instruction_memory_nouns: &gate_words::INSTRUCTION_MEMORY_NOUNS,
    instruction_quantifiers: &gate_words::INSTRUCTION_QUANTIFIERS,
    promise_first_person: &gate_words::PROMISE_FIRST_PERSON,
    promise_commitment_words: &gate_words::PROMISE_COMMITMENT_WORDS,
    relation_relations: &gate_words::RELATION_RELATIONS,
    relation_endings: &gate_words::RELATION_ENDINGS,
    relation_role_verbs: &gate_words::RELATION_ROLE_VERBS,
    relation_not_roles: &gate_words::RELATION_NOT_ROLES,
    relation_not_exclusive: &gate_words::RELATION_NOT_EXCLUSIVE,
    relation_adverbs: &gate_words::RELATION_ADVERBS,
    relation_clause_breaks: &gate_words::RELATION_CLAUSE_BREAKS,
    relation_not_subjects: &gate_words::RELATION_NOT_SUBJECTS,
    relative_irregular_past: gate_words::RELATIVE_IRREGULAR_PAST,
    relative_not_past: gate_words::RELATIVE_NOT_PAST,
    subject_leading: &gate_words::SUBJECT_LEADING,
    subject_joins: &gate_words::SUBJECT_JOINS,
    subject_definite: &gate_words::SUBJECT_DEFINITE,
    subject_others: &gate_words::SUBJECT_OTHERS,
    subject_naming: &gate_words::SUBJECT_NAMING,
    subject_bare: &gate_words::SUBJECT_BARE,
    subject_impersonal: &gate_words::SUBJECT_IMPERSONAL,
    subject_fillers: &gate_words::SUBJECT_FILLERS,
    person_first: &gate_words::PERSON_FIRST,
    person_second: &gate_words::PERSON_SECOND,
    subject_personal: &gate_words::SUBJECT_PERSONAL,
    subject_people: &gate_words::SUBJECT_PEOPLE,
    vaguer_changes: &gate_words::VAGUER_CHANGES,
    cues: &rule_words::CUES,
    history_past_cues: &rule_words::HISTORY_PAST_CUES,
    perspective_auxiliaries: &rule_words::PERSPECTIVE_AUXILIARIES,
    perspective_not_verbs: &rule_words::PERSPECTIVE_NOT_VERBS,
    unmentioned_attributes: rule_words::UNMENTIONED_ATTRIBUTES,
    unmentioned_modifiers: rule_words::UNMENTIONED_MODIFIERS,
    unmentioned_not_things: rule_words::UNMENTIONED_NOT_THINGS,
    unmentioned_kinds: rule_words::UNMENTIONED_KINDS,
    unusable_asking: &rule_words::UNUSABLE_ASKING,
    unusable_framing: &rule_words::UNUSABLE_FRAMING,
    unusable_negations: &rule_words::UNUSABLE_NEGATIONS,
    gates_date_words: &rule_words::GATES_DATE_WORDS,
    consolidate_negations: &rule_words::CONSOLIDATE_NEGATIONS,
    keywords_stopwords: rule_words::KEYWORDS_STOPWORDS,
    names_owners: &rule_words::NAMES_OWNERS,
    names_naming: &rule_words::NAMES_NAMING,
};

/// The English rules.
pub struct English;

impl Language for English {
    fn stem(&self, word: &str) -> String {
        // Creating a Snowball stemmer only picks its function: no state to keep.
        Stemmer::create(Algorithm::English).stem(word).into_owned()
    }

    fn words(&self) -> &'static WordLists {
        &WORDS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inflections_meet() {
        let en = English;
        for (a, b) in [
            ("plays", "play"),
            ("played", "playing"),
            ("dogs", "dog"),
            ("families", "family"),
            ("studies", "studying"),
            ("moved", "moves"),
        ] {
            assert_eq!(en.stem(a), en.stem(b), "{a} / {b}");
        }
        assert_ne!(en.stem("meat"), en.stem("meet"));
    }
}
