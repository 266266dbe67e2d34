//! English's word lists for the single memory gates (`postprocess::gates::*`), one section per
//! gate: how a sentence names its subject, a relation, a date, a deadline, an instruction, a promise.

/// Words that open a greeting or thanks, before the name ("Hey Mel!", "Thank you, Mel.").
pub(super) const ADDRESSED_OPENERS: [&str; 9] = [
    "hey",
    "hi",
    "hello",
    "thanks",
    "thank you",
    "dear",
    "morning",
    "good morning",
    "yo",
];

/// Capitalised words after an opener that are no name ("Hi There!", "Thanks So much").
pub(super) const ADDRESSED_NOT_NAMES: [&str; 12] = [
    "There", "All", "Everyone", "Again", "So", "For", "Guys", "Friend", "Buddy", "Man", "You",
    "Both",
];

/// Words that join a statement onto a question.
pub(super) const ASKED_JOINS: [&str; 6] = ["since", "because", "as", "now", "that", "so"];

/// Words that open a clause about the user.
pub(super) const ASKED_FIRST_PERSON: [&str; 8] =
    ["i", "im", "ive", "id", "we", "were", "my", "our"];

/// Relative times and the days they can mean, counted from the day they were said (UTC: a
/// user's "yesterday" late at night can be two days back).
pub(super) const DATES_RELATIVE: [(&str, i64, i64); 31] = [
    ("today", 0, 0),
    ("tonight", 0, 0),
    ("this morning", 0, 0),
    ("this evening", 0, 0),
    ("now", 0, 0),
    ("yesterday", -2, -1),
    ("tomorrow", 1, 2),
    ("last week", -14, -1),
    ("next week", 1, 14),
    ("this week", -7, 7),
    ("last weekend", -9, -1),
    ("this weekend", -3, 7),
    ("next weekend", 1, 14),
    ("last month", -62, -1),
    ("next month", 1, 62),
    ("this month", -31, 31),
    ("last year", -730, -1),
    ("next year", 1, 730),
    ("this year", -366, 366),
    ("ago", -3_660, -1),
    ("recently", -90, 0),
    ("weeks", -90, 90),
    ("months", -400, 400),
    ("coming", 0, 62),
    ("soon", 0, 62),
    ("last", -14, -1),
    ("next", 1, 14),
    ("monday", -7, 7),
    ("friday", -7, 7),
    ("saturday", -7, 7),
    ("sunday", -7, 7),
];

/// Words that open a date phrase, and what may stand between them and the date.
pub(super) const DATES_OPENERS: [&str; 8] =
    ["in", "on", "since", "during", "by", "around", "from", "of"];

pub(super) const DATES_MODIFIERS: [&str; 5] = ["early", "mid", "late", "the", "around"];

/// Phrases that make a text a deadline.
pub(super) const DEADLINE_DUE: [&str; 5] = ["deadline", "due date", "is due", "due on", "due by"];

/// Stems of the words of a deadline and its change, and of who may change it: they say nothing
/// of what it is for.
pub(super) const DEADLINE_MOVING: [&str; 20] = [
    "deadline",
    "due",
    "date",
    "extend",
    "extension",
    "postpon",
    "push",
    "mov",
    "chang",
    "new",
    "final",
    "original",
    "now",
    "supervisor",
    "professor",
    "advisor",
    "adviser",
    "boss",
    "manager",
    "teacher",
];

/// Someone else's deadline is not the user's (stems of content words).
pub(super) const DEADLINE_OTHERS: [&str; 12] = [
    "brother",
    "sister",
    "mother",
    "father",
    "wife",
    "husband",
    "partner",
    "son",
    "daughter",
    "friend",
    "colleague",
    "coworker",
];

pub(super) const FORM_PLACEHOLDERS: [&str; 10] = [
    "na", "n a", "none", "null", "unknown", "tbd", "text", "fact", "memory", "nothing",
];

/// Phrases that only instructions to a model contain.
pub(super) const INSTRUCTION_PHRASES: [&str; 22] = [
    "ignore previous",
    "ignore all previous",
    "ignore the previous",
    "ignore prior",
    "ignore all prior",
    "ignore the above",
    "ignore all instructions",
    "ignore your instructions",
    "ignore these instructions",
    "disregard previous",
    "disregard all",
    "disregard the above",
    "disregard your",
    "previous instructions",
    "prior instructions",
    "system prompt",
    "developer message",
    "you are now",
    "new instructions",
    "from now on you",
    "jailbreak",
    "do anything now",
];

/// Role labels and chat-template tokens a text may open with to pass as another message.
pub(super) const INSTRUCTION_OPENINGS: [&str; 7] = [
    "system:",
    "assistant:",
    "developer:",
    "[system]",
    "<|",
    "### instruction",
    "### system",
];

pub(super) const INSTRUCTION_WIPE_VERBS: [&str; 7] = [
    "delete", "erase", "wipe", "forget", "clear", "remove", "reset",
];

pub(super) const INSTRUCTION_MEMORY_NOUNS: [&str; 8] = [
    "memories",
    "memory",
    "facts",
    "fact",
    "notes",
    "note",
    "everything",
    "data",
];

pub(super) const INSTRUCTION_QUANTIFIERS: [&str; 7] = [
    "all",
    "every",
    "everything",
    "any",
    "other",
    "your",
    "entire",
];

/// How an assistant promises something in the first person (lower case, straight apostrophes).
pub(super) const PROMISE_FIRST_PERSON: [&str; 14] = [
    "i'll",
    "i will",
    "i'm going to",
    "i am going to",
    "i promise",
    "let me",
    "i shall",
    "i can remind",
    "i'd be happy to",
    "i would be happy to",
    "i'll make sure",
    "i will make sure",
    "i've set",
    "i have set",
];

/// Words that say a commitment was made, not what it is about.
pub(super) const PROMISE_COMMITMENT_WORDS: [&str; 9] = [
    "assistant",
    "promised",
    "promises",
    "agreed",
    "offered",
    "committed",
    "going",
    "make",
    "sure",
];

/// Facts of which a user has one at a time: where they live, where they work, their job.
pub(super) const RELATION_RELATIONS: [(&str, &[&str]); 3] = [
    (
        "home",
        &[
            "lives in",
            "moved to",
            "relocated to",
            "is based in",
            "lives near",
        ],
    ),
    (
        "workplace",
        &[
            "works at",
            "works for",
            "is employed at",
            "is employed by",
            "started working at",
            "got a job at",
        ],
    ),
    ("job", &["works as", "is employed as", "job is"]),
];

/// Phrases that say a relation ended, and which relations they may end.
pub(super) const RELATION_ENDINGS: [(&str, &[&str]); 6] = [
    ("left", &["home", "workplace", "job"]),
    ("quit", &["workplace", "job"]),
    ("resigned from", &["workplace", "job"]),
    ("was laid off from", &["workplace", "job"]),
    ("moved out of", &["home"]),
    ("moved away from", &["home"]),
];

/// "is a nurse at St Mary's": a job and a workplace, when an "at" or "for" follows.
pub(super) const RELATION_ROLE_VERBS: [&str; 6] = [
    "is a",
    "is an",
    "became a",
    "became an",
    "was hired as a",
    "was hired as an",
];

/// "is a regular at Casa Mia" is no job.
pub(super) const RELATION_NOT_ROLES: [&str; 12] = [
    "regular",
    "member",
    "customer",
    "guest",
    "patient",
    "client",
    "volunteer",
    "fan",
    "visitor",
    "subscriber",
    "student",
    "donor",
];

/// Words that make a relation one of several ("also works at"), or not the present one.
pub(super) const RELATION_NOT_EXCLUSIVE: [&str; 12] = [
    "also",
    "too",
    "as well",
    "part-time",
    "part time",
    "side",
    "second",
    "sometimes",
    "occasionally",
    "used to",
    "formerly",
    "previously",
];

/// Words dropped before reading a claim: they date it, they do not change it.
pub(super) const RELATION_ADVERBS: [&str; 7] = [
    "now",
    "currently",
    "recently",
    "just",
    "finally",
    "officially",
    "still",
];

/// Words after which the rest of a sentence is another clause.
pub(super) const RELATION_CLAUSE_BREAKS: [&str; 10] = [
    ",",
    ";",
    " and ",
    " but ",
    " where ",
    " which ",
    " since ",
    " because ",
    " while ",
    " who ",
];

/// A subject with one of these is a clause about the fact, not the fact ("the user thinks Ana").
pub(super) const RELATION_NOT_SUBJECTS: [&str; 10] = [
    "thinks", "believes", "said", "says", "wants", "hopes", "that", "if", "whether", "when",
];

/// Past tenses that do not end in "-ed".
pub(super) const RELATIVE_IRREGULAR_PAST: &[&str] = &[
    "went", "saw", "ate", "bought", "got", "took", "made", "met", "had", "did", "ran", "rode",
    "swam", "drove", "flew", "came", "left", "spent", "found", "gave", "told", "won", "lost",
    "began", "brought", "caught", "felt", "kept", "paid", "sold", "sent", "slept", "wrote", "was",
    "were", "broke", "fell", "forgot", "heard", "hurt", "built", "chose", "drank", "sang", "threw",
];

/// Words that make a fact a plan or a habit, or point past its verb to a time to come
/// ("promised to remind … on Friday"), whatever else it says.
pub(super) const RELATIVE_NOT_PAST: &[&str] = &[
    "will",
    "plans",
    "plan",
    "planned",
    "planning",
    "going",
    "usually",
    "every",
    "often",
    "always",
    "wants",
    "wanted",
    "hopes",
    "hoped",
    "intends",
    "intended",
    "next",
    "promised",
    "agreed",
    "offered",
    "decided",
    "scheduled",
    "booked",
    "reserved",
    "arranged",
    "invited",
    "expected",
    "due",
    "remind",
    "reminded",
    "asked",
    "until",
];

/// Words that may open a clause before its subject.
pub(super) const SUBJECT_LEADING: [&str; 22] = [
    "yesterday",
    "today",
    "tonight",
    "also",
    "so",
    "then",
    "now",
    "well",
    "oh",
    "and",
    "but",
    "this",
    "last",
    "morning",
    "week",
    "weekend",
    "evening",
    "recently",
    "finally",
    "actually",
    "anyway",
    "btw",
];

/// Words that end a clause (the next one has its own subject, or the same one unsaid).
pub(super) const SUBJECT_JOINS: [&str; 8] = [
    "and", "but", "while", "because", "although", "though", "when", "since",
];

pub(super) const SUBJECT_DEFINITE: [&str; 1] = ["the"];

pub(super) const SUBJECT_OTHERS: [&str; 4] = ["he", "she", "they", "it"];

/// How a fact gives the user a name.
pub(super) const SUBJECT_NAMING: [&str; 3] =
    ["the user is ", "the user's name is ", "the user is called "];

/// Pronouns that leave a fact without a referent when nothing else names it.
pub(super) const SUBJECT_BARE: [&str; 6] = ["it", "them", "this", "that", "these", "those"];

/// Openings of a statement about no one.
pub(super) const SUBJECT_IMPERSONAL: [&str; 9] = [
    "it's ",
    "it is ",
    "it was ",
    "there is ",
    "there are ",
    "there's ",
    "this is ",
    "that is ",
    "that's ",
];

/// Words of doing, promising or stressing that say nothing of what was done ("The assistant
/// promised to do exactly that."). Plain words, stemmed by the gate like the fact's words.
pub(super) const SUBJECT_FILLERS: [&str; 12] = [
    "promise",
    "exactly",
    "really",
    "actually",
    "definitely",
    "certainly",
    "sure",
    "agree",
    "go",
    "plan",
    "want",
    "try",
];

/// The speaker's words for themselves, alone and with the verbs they join.
pub(super) const PERSON_FIRST: [&str; 19] = [
    "i",
    "i'm",
    "i've",
    "i'd",
    "i'll",
    "me",
    "my",
    "mine",
    "myself",
    "we",
    "we're",
    "we've",
    "we'd",
    "we'll",
    "us",
    "our",
    "ours",
    "ourselves",
    "let's",
];

/// The words for the one spoken to.
pub(super) const PERSON_SECOND: [&str; 8] = [
    "you", "your", "yours", "yourself", "you're", "you've", "you'll", "you'd",
];

/// Pronouns for a person, who must be named somewhere in the fact.
pub(super) const SUBJECT_PERSONAL: [&str; 5] = ["he", "him", "she", "her", "hers"];

/// Nouns for a person a pronoun may refer to (a trailing "s" aside; "grandparents" and
/// "stepmother" end in one).
pub(super) const SUBJECT_PEOPLE: [&str; 40] = [
    "brother",
    "sister",
    "mother",
    "father",
    "mom",
    "mum",
    "dad",
    "parent",
    "wife",
    "husband",
    "partner",
    "boyfriend",
    "girlfriend",
    "son",
    "daughter",
    "child",
    "kid",
    "baby",
    "friend",
    "colleague",
    "coworker",
    "boss",
    "manager",
    "neighbor",
    "neighbour",
    "uncle",
    "aunt",
    "cousin",
    "grandmother",
    "grandfather",
    "grandma",
    "grandpa",
    "niece",
    "nephew",
    "doctor",
    "teacher",
    "roommate",
    "fiance",
    "fiancee",
    "supervisor",
];

/// Words that make a fact a change or a denial, never a vaguer variant of another ("The user no
/// longer works at Fabrikam." beside "The user works at Fabrikam as a data analyst.").
pub(super) const VAGUER_CHANGES: [&str; 11] = [
    " not ", "n't", " no ", "never", "longer", "former", "anymore", "stopped", "quit", " left",
    "used to",
];
