//! English's word lists for the rules outside the gates: retrieval cues, past-tense cues, whose
//! words a memory speaks in, what a question asks after, what an agent's unusable answer says,
//! and the keyword search's stop words.

/// Phrases that address what the assistant said or did (lowercase, matched as whole words).
pub(super) const CUES: [&str; 24] = [
    "did you",
    "you said",
    "you say",
    "you told",
    "you tell",
    "you suggest",
    "you suggested",
    "you recommend",
    "you recommended",
    "you promise",
    "you promised",
    "you mention",
    "you mentioned",
    "you gave",
    "you give",
    "you advise",
    "you advised",
    "you offered",
    "you proposed",
    "you picked",
    "you wrote",
    "your suggestion",
    "your advice",
    "your recommendation",
];

/// Words and phrases that ask about how things were (matched as whole words, lowercase).
pub(super) const HISTORY_PAST_CUES: [&str; 18] = [
    "before",
    "previous",
    "previously",
    "used to",
    "former",
    "formerly",
    "originally",
    "at first",
    "earlier",
    "prior",
    "anymore",
    "any more",
    "no longer",
    "still",
    "old",
    "change",
    "changed",
    "changes",
];

/// Words after which a verb keeps its base form ("do I live", "will I go"), and which are not
/// conjugated themselves.
pub(super) const PERSPECTIVE_AUXILIARIES: [&str; 15] = [
    "do", "does", "did", "can", "could", "will", "would", "shall", "should", "may", "might",
    "must", "to", "am", "have",
];

/// Words that often follow "I" and are not verbs to conjugate.
pub(super) const PERSPECTIVE_NOT_VERBS: [&str; 10] = [
    "was", "also", "just", "really", "never", "always", "still", "often", "already", "usually",
];

/// Properties every person has, and words too general to check: often told without the word.
#[rustfmt::skip]
pub(super) const UNMENTIONED_ATTRIBUTES: &[&str] = &[
    "name", "names", "age", "birthday", "birth", "job", "jobs", "work", "career", "profession",
    "occupation", "role", "title", "employer", "company", "office", "workplace", "boss", "city",
    "town", "country", "home", "hometown", "house", "flat", "apartment", "place", "address",
    "neighborhood", "neighbourhood", "life", "day", "days", "week", "weekend", "weekends", "year",
    "years", "month", "morning", "evening", "night", "plan", "plans", "schedule", "routine",
    "hobby", "hobbies", "interest", "interests", "diet", "food", "foods", "taste", "preference",
    "preferences", "opinion", "goal", "goals", "family", "friend", "friends", "email", "phone",
    "number", "one", "ones", "way", "time", "problem", "question", "questions", "answer", "memory",
    "stuff", "thing", "things", "idea", "ideas", "situation", "status", "health", "mood", "budget",
    "salary", "income", "background", "experience", "education", "degree", "school", "studies",
    "language", "languages", "religion", "height", "weight", "size", "style", "type", "kind",
    "sort", "self", "own", "name's", "life's", "account", "password", "order", "message",
    "messages", "list", "note", "notes", "day's", "head", "mind", "heart", "body", "eyes", "hair",
];

/// Words that may stand between "my" and the thing ("my new car", "my older brother").
#[rustfmt::skip]
pub(super) const UNMENTIONED_MODIFIERS: &[&str] = &[
    "new", "old", "older", "oldest", "young", "younger", "youngest", "little", "big", "current",
    "previous", "former", "first", "last", "next", "favorite", "favourite", "best", "usual",
    "latest", "other", "second", "third", "only", "dear", "late", "ex", "two", "three", "eldest",
    "baby", "elder",
];

/// Words after "my" that end the phrase without a thing: verbs and function words.
#[rustfmt::skip]
pub(super) const UNMENTIONED_NOT_THINGS: &[&str] = &[
    "is", "are", "was", "were", "be", "been", "do", "does", "did", "has", "have", "had", "will",
    "would", "can", "could", "should", "to", "of", "in", "on", "at", "for", "from", "with", "and",
    "or", "but", "the", "a", "an", "this", "that", "these", "those", "it", "its", "so", "then",
    "than", "about", "like", "again", "too", "also", "very", "really", "mine", "going",
];

/// Things that other words mention: (thing asked, the words that count).
#[rustfmt::skip]
pub(super) const UNMENTIONED_KINDS: &[(&str, &[&str])] = &[
    ("pet", &[
        "pet", "dog", "cat", "puppy", "kitten", "bird", "fish", "hamster", "rabbit", "bunny",
        "parrot", "turtle", "horse", "snake", "lizard", "guinea",
    ]),
    ("pets", &[
        "pet", "dog", "cat", "puppy", "kitten", "bird", "fish", "hamster", "rabbit", "bunny",
        "parrot", "turtle", "horse", "snake", "lizard", "guinea",
    ]),
    ("dog", &["dog", "puppy", "pup", "doggy"]),
    ("cat", &["cat", "kitten", "kitty"]),
    ("partner", &[
        "partner", "wife", "husband", "spouse", "girlfriend", "boyfriend", "fiance", "fiancee",
    ]),
    ("wife", &["wife", "partner", "spouse", "fiancee"]),
    ("husband", &["husband", "partner", "spouse", "fiance"]),
    ("spouse", &["spouse", "wife", "husband", "partner"]),
    ("girlfriend", &["girlfriend", "partner"]),
    ("boyfriend", &["boyfriend", "partner"]),
    ("kids", &["kid", "child", "children", "son", "daughter", "baby", "toddler"]),
    ("kid", &["kid", "child", "children", "son", "daughter", "baby", "toddler"]),
    ("children", &["kid", "child", "children", "son", "daughter", "baby", "toddler"]),
    ("child", &["kid", "child", "children", "son", "daughter", "baby", "toddler"]),
    ("son", &["son", "kid", "child", "children", "boy"]),
    ("daughter", &["daughter", "kid", "child", "children", "girl"]),
    ("parents", &["parent", "mom", "mum", "mother", "dad", "father", "mama", "papa"]),
    ("mom", &["mom", "mum", "mother", "mama", "parent"]),
    ("mum", &["mom", "mum", "mother", "mama", "parent"]),
    ("mother", &["mom", "mum", "mother", "mama", "parent"]),
    ("dad", &["dad", "father", "papa", "parent"]),
    ("father", &["dad", "father", "papa", "parent"]),
    ("siblings", &["sibling", "brother", "sister", "twin"]),
    ("brother", &["brother", "sibling", "twin", "bro"]),
    ("sister", &["sister", "sibling", "twin", "sis"]),
    ("car", &["car", "vehicle", "truck", "suv", "van", "auto", "automobile"]),
    ("vehicle", &["car", "vehicle", "truck", "suv", "van", "motorbike", "motorcycle"]),
    ("bike", &["bike", "bicycle", "motorbike", "motorcycle"]),
    ("bicycle", &["bike", "bicycle"]),
    ("doctor", &["doctor", "physician", "gp", "dr"]),
    ("vet", &["vet", "veterinarian", "veterinary"]),
    ("dentist", &["dentist"]),
    ("therapist", &["therapist", "psychologist", "counselor", "counsellor"]),
    ("gym", &["gym"]),
    ("lawyer", &["lawyer", "attorney", "solicitor"]),
    ("laptop", &["laptop", "computer", "notebook", "macbook"]),
    ("computer", &["laptop", "computer", "pc", "macbook", "desktop"]),
    ("manager", &["manager", "boss", "supervisor"]),
];

/// Words that open a question asking for something (a question that `yes` or `no` answers
/// may be answered in its own words: "Do I eat meat?" "No, you don't eat meat.").
pub(super) const UNUSABLE_ASKING: [&str; 9] = [
    "what", "which", "who", "whom", "whose", "where", "when", "how", "why",
];

/// Words a reply wraps a question in, which answer nothing.
pub(super) const UNUSABLE_FRAMING: [&str; 34] = [
    "understand",
    "want",
    "wants",
    "know",
    "knowing",
    "like",
    "anything",
    "else",
    "interested",
    "asking",
    "ask",
    "asked",
    "question",
    "wondering",
    "wonder",
    "curious",
    "tell",
    "help",
    "glad",
    "happy",
    "certainly",
    "sure",
    "great",
    "okay",
    "course",
    "let",
    "see",
    "find",
    "out",
    "learn",
    "regarding",
    "information",
    "please",
    "more",
];

/// Words that say no, or that the answer is not known: a reply with one says something.
pub(super) const UNUSABLE_NEGATIONS: [&str; 7] =
    ["not", "no", "never", "none", "nothing", "cannot", "unknown"];

/// Words that only date a fact ("in October 2026", "on March 2", "last week").
/// (Weekdays and months are [`crate::dates`]' lists.)
pub(super) const GATES_DATE_WORDS: [&str; 11] = [
    "today",
    "yesterday",
    "tomorrow",
    "week",
    "month",
    "year",
    "ago",
    "last",
    "next",
    "since",
    "recently",
];

/// Words whose presence flips a statement: a fact is contained in another only with the same ones.
pub(super) const CONSOLIDATE_NEGATIONS: [&str; 5] = ["not", "no", "never", "don't", "doesn't"];

/// Words too common to help a keyword search (they would match nearly every row).
pub(super) const KEYWORDS_STOPWORDS: &[&str] = &[
    "a", "about", "all", "am", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by",
    "can", "could", "did", "do", "does", "for", "from", "had", "has", "have", "he", "her", "him",
    "his", "how", "i", "if", "in", "into", "is", "it", "its", "just", "me", "my", "no", "not",
    "of", "on", "or", "our", "she", "so", "some", "than", "that", "the", "their", "them", "then",
    "there", "these", "they", "this", "to", "up", "us", "was", "we", "were", "what", "when",
    "where", "which", "who", "why", "will", "with", "would", "you", "your",
];

/// Words that say whose someone is, before the noun and the name ("my brother Tomas", "The
/// user's sister Ana").
pub(super) const NAMES_OWNERS: [&str; 7] = ["my", "our", "user's", "users", "their", "his", "her"];

/// Words that give a name ("a cat named Mochi").
pub(super) const NAMES_NAMING: [&str; 2] = ["named", "called"];
