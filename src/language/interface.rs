//! The interface a language implements for the text rules: its stemmer and the word lists the
//! memory gates read (each list named by what its words do in a sentence, and for the single
//! gates after the gate that reads it).

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
    /// Words that open a noun phrase naming a thing already known ("the"): a clause opening
    /// with one is about that thing.
    pub subject_definite: &'static [&'static str],
    /// Pronouns of another person or thing ("he", "she", "they", "it").
    pub subject_others: &'static [&'static str],
    /// How a fact gives the user a name (lowercase, with the space after: "the user is ").
    pub subject_naming: &'static [&'static str],
    /// Pronouns that leave a fact without a referent when nothing else names it.
    pub subject_bare: &'static [&'static str],
    /// Openings of a statement about no one.
    pub subject_impersonal: &'static [&'static str],
    /// Words of doing, promising or stressing that say nothing of what was done ("The assistant
    /// promised to do exactly that."); plain words, stemmed by the gate like the fact's words.
    pub subject_fillers: &'static [&'static str],
    /// The speaker's own words for themselves ("I", "my", "we", "our"; lowercase, straight
    /// apostrophes): a memory is read without its conversation, where they name no one.
    pub person_first: &'static [&'static str],
    /// The words for the one spoken to ("you", "your"): in a memory, they name no one either.
    pub person_second: &'static [&'static str],
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
