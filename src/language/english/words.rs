//! English's word lists for the memory gates (`postprocess::gates`): what makes a commitment, a reported question, a passing plan,
//! a claim only the user may make, and the words that carry no content.

/// Words that make a statement about the assistant a commitment.
pub(super) const PROMISES: [&str; 12] = [
    "will",
    "promis",
    "remind",
    "going to",
    "agreed",
    "offered",
    "book",
    "schedul",
    "send",
    "follow up",
    "check back",
    "later",
];

/// How small models restate a question as a fact ("The user asked about a good dinner").
pub(super) const REPORTED_QUESTIONS: [&str; 14] = [
    "asked about",
    "asked for",
    "asks about",
    "asks for",
    "asks how",
    "asks what",
    "asked whether",
    "asked if",
    "asked how",
    "asked what",
    "wants to know",
    "wanted to know",
    "inquired",
    "is asking",
];
/// How small models restate a question as an interest ("The user is interested in making a
/// pivot table faster" from "How do I make a pivot table faster?"), and the words they add.
pub(super) const INTERESTS: [&str; 11] = [
    "interested in",
    "wants to learn",
    "would like to",
    "looking for",
    "needs help",
    "wants help",
    "seeking",
    "curious about",
    "information about",
    "information on",
    "wants to know more",
];
pub(super) const INTEREST_WORDS: [&str; 8] = [
    "interest", "want", "learn", "like", "look", "need", "help", "seek",
];
/// Words of courtesy: a line made only of them ("The user thanks the assistant.") is manners,
/// not a fact. Plain words: the gate stems them with the language's stemmer, as it stems the
/// fact's words, so that "apologizes" meets "apologize".
pub(super) const COURTESY: [&str; 12] = [
    "thank",
    "hello",
    "hi",
    "hey",
    "greet",
    "welcome",
    "appreciate",
    "bye",
    "goodbye",
    "please",
    "sorry",
    "apologize",
];
/// Words of saying, which a line of courtesy may hold too ("The user said hello and thanks.").
pub(super) const SAYING: [&str; 6] = ["say", "said", "express", "again", "lot", "much"];
/// A plan for these hours is over by the next chat.
pub(super) const PASSING: [&str; 4] = ["tonight", "this evening", "this afternoon", "right now"];
/// What someone says they will think over: no commitment, no lasting fact.
pub(super) const MUSINGS: [&str; 9] = [
    "will think",
    "will consider",
    "will ponder",
    "will keep in mind",
    "will reflect",
    // "The assistant promised to think about the menu later." (as a small model writes it)
    "to think about",
    "to consider",
    "to ponder",
    "to reflect",
];
/// Claims a fact may only make in the user's own words (stems).
pub(super) const SENSITIVE: [&str; 12] = [
    "allerg",
    "intoleran",
    "diabet",
    "celiac",
    "coeliac",
    "pregnan",
    "vegan",
    "vegetarian",
    "asthma",
    "epilep",
    "halal",
    "kosher",
];

/// How a fact says the user likes something: the user must have said so in some words of
/// liking ([`LIKING_SAID`]), or it is the model's reading ("The user has a preference for painting
/// the kitchen blue." from "This weekend I … painted the kitchen blue.").
const LIKING: [&str; 10] = [
    "preference for",
    "prefers",
    "likes",
    "loves",
    "enjoys",
    "is a fan of",
    "favorite",
    "favourite",
    "is fond of",
    "is passionate about",
];
/// Words of liking in what the user said (lowercased text; generous on purpose).
const LIKING_SAID: [&str; 20] = [
    "like",
    "love",
    "enjoy",
    "prefer",
    "fan of",
    "favorite",
    "favourite",
    "fond",
    "adore",
    "into ",
    "passion",
    "can't get enough",
    "obsess",
    "crazy about",
    "keen on",
    "go-to",
    "hooked",
    "great",
    "amazing",
    "awesome",
];
/// Words of wanting, seeking or planning in what the user said (lowercased text; generous on
/// purpose): without one, an [`INTERESTS`] claim is the model's reading ("The user is interested
/// in painting." from "I painted the kitchen blue."; "The user is looking for a new job." from
/// "I moved to Porto for a new job.").
const INTEREST_SAID: [&str; 28] = [
    "interest",
    "want",
    "wanna",
    "curious",
    "learn",
    "look",
    "hope",
    "hoping",
    "wish",
    "keen",
    "into ",
    "fascinat",
    "'d like",
    "would like",
    "'d love",
    "would love",
    "need",
    "help",
    "seek",
    "search",
    "try",
    "trying",
    "plan",
    "thinking",
    "consider",
    "dream",
    "eager",
    "explor",
];
/// How a fact says the user worries about something.
const CONCERNS: [&str; 5] = [
    "concerned about",
    "worried about",
    "worries about",
    "anxious about",
    "afraid of",
];
/// Words of worry in what the user said: "The paint smell is awful." is a complaint, and "The user
/// is concerned about the smell of the paint." the model's reading of it.
const CONCERN_SAID: [&str; 12] = [
    "worr", "concern", "anxious", "nervous", "afraid", "scared", "fear", "stress", "panic",
    "uneasy", "bother", "freak",
];
/// How a fact tells the assistant's answer as something the user learned ("The user has learned
/// about the lifespan of paint smell." from the reply "The paint smell will last for about 2-3
/// days."), or a complaint as an experience ("The user has experienced a paint smell." from "The
/// paint smell is awful.").
const LEARNED: [&str; 13] = [
    "learned about",
    "has learned",
    "learnt about",
    "was told",
    "has been told",
    "was informed",
    "was advised",
    "received advice",
    "received information",
    "received tips",
    "got advice",
    "is aware of",
    "is aware that",
];
const LEARNED_SAID: [&str; 10] = [
    "learn",
    "told",
    "heard",
    "read ",
    "aware",
    "found out",
    "discover",
    "taught",
    "studied",
    "know",
];
const EXPERIENCED: [&str; 4] = [
    "has experienced",
    "experienced a",
    "is experiencing",
    "has been experiencing",
];
const EXPERIENCED_SAID: [&str; 8] = [
    "experienc",
    "suffer",
    "went through",
    "going through",
    "struggl",
    "deal",
    "felt",
    "feel",
];
/// Claims a model reads into what the user said, each with the words the user must have used
/// for the claim to be theirs.
pub(super) const READINGS: [(&[&str], &[&str]); 5] = [
    (&LIKING, &LIKING_SAID),
    (&INTERESTS, &INTEREST_SAID),
    (&CONCERNS, &CONCERN_SAID),
    (&LEARNED, &LEARNED_SAID),
    (&EXPERIENCED, &EXPERIENCED_SAID),
];

/// Words that carry no content of their own, and the words naming the two sides.
pub(super) const STOP_WORDS: [&str; 74] = [
    "a",
    "an",
    "the",
    "and",
    "or",
    "but",
    "of",
    "to",
    "in",
    "on",
    "at",
    "for",
    "with",
    "by",
    "from",
    "as",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "has",
    "have",
    "had",
    "do",
    "does",
    "did",
    "will",
    "would",
    "can",
    "could",
    "should",
    "may",
    "might",
    "it",
    "its",
    "this",
    "that",
    "these",
    "those",
    "there",
    "their",
    "they",
    "them",
    "he",
    "she",
    "his",
    "her",
    "him",
    "i",
    "me",
    "my",
    "you",
    "your",
    "we",
    "our",
    "us",
    "user",
    "users",
    "assistant",
    "about",
    "also",
    "not",
    "no",
    "so",
    "very",
    "just",
    "than",
    "then",
    "into",
    "who",
    "which",
];
