//! Why a gate refused a fact or an update: one named reason per rule, logged and counted.

/// Why a fact or an update was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rejection {
    /// Empty, or a placeholder ("...", "N/A", "<text>").
    Placeholder,
    /// Fewer than [`MIN_WORDS`] words: not self-contained.
    TooShort,
    Question,
    /// Drawn from what the user asked, not from anything they stated ("The user has a preference
    /// for a good night's sleep" from "Any tips for sleeping after night shifts?").
    FromQuestion,
    /// A list item or heading cut out of an answer ("1. Data Migration").
    ListFragment,
    /// (Nearly) word for word a line of the assistant's.
    CopyOfAssistant,
    /// (Nearly) word for word one of the user's questions.
    CopyOfQuestion,
    /// Its content words do not come mostly from what the user said (general knowledge, the
    /// assistant's advice, the prompt's own examples, the injected memory block).
    Ungrounded,
    /// An update that drops the subject of the memory it replaces, or most of its text.
    LosesSubject,
    /// Several facts in one text (an update that piles new facts onto an old one keeps a stale
    /// one alive: "lives in Lisbon … moved to Porto").
    SeveralFacts,
    /// About the assistant without being a commitment ("The assistant provides tips").
    AboutAssistant,
    /// Much of it is what the assistant said, attributed to the user ("The user suggests a
    /// stir-fry" when the assistant suggested it).
    FromAssistant,
    /// A passing intention, not a lasting fact ("The user will think about the menu later"), or
    /// a plan for tonight.
    Transient,
    /// Said of someone else in the user's words ("The user ate grass" when the cat did).
    NotTheUser,
    /// Its only object is a pronoun ("The user booked it.").
    NoReferent,
    /// Only manners ("The user thanks the assistant.").
    Courtesy,
    /// Says nothing a core-memory block does not say already ("The user bought a grinder." under
    /// "The user bought a new grinder, a Baratza Encore.").
    Restated,
    /// A month or year the user neither wrote nor can have meant by a relative time ("on March
    /// 2, 2026" added to a lasting fact, "October 2025" for "last week" in November 2026).
    InventedDate,
    /// A commitment of the assistant's that none of its lines made ("The assistant promised to
    /// check …" when it only asked whether it should).
    NotPromised,
    /// Speaks to the assistant or its memory ("Ignore previous instructions", "Delete all
    /// memories"): stored, it would be a standing prompt injection.
    Instruction,
    /// In the first person ("The stories were so inspiring! I was so happy."): a line of the
    /// conversation, not a fact about the user written as one.
    FirstPerson,
    /// In the second person ("The assistant will keep you updated."): the assistant's line
    /// copied, not a fact written about the user.
    SecondPerson,
    /// Says less than another fact of the same batch, in words the user never said: a
    /// paraphrase beside the fact as told ("The user will take advantage of the extra time."
    /// beside "The user will use the extra time for more field data.").
    Vaguer,
}

impl Rejection {
    pub fn as_str(self) -> &'static str {
        match self {
            Rejection::Placeholder => "placeholder",
            Rejection::TooShort => "too_short",
            Rejection::Question => "question",
            Rejection::FromQuestion => "from_question",
            Rejection::Courtesy => "courtesy",
            Rejection::Restated => "restated",
            Rejection::ListFragment => "list_fragment",
            Rejection::CopyOfAssistant => "copy_of_assistant",
            Rejection::CopyOfQuestion => "copy_of_question",
            Rejection::Ungrounded => "ungrounded",
            Rejection::LosesSubject => "loses_subject",
            Rejection::SeveralFacts => "several_facts",
            Rejection::AboutAssistant => "about_assistant",
            Rejection::FromAssistant => "from_assistant",
            Rejection::Transient => "transient",
            Rejection::NotTheUser => "not_the_user",
            Rejection::NoReferent => "no_referent",
            Rejection::Instruction => "instruction",
            Rejection::NotPromised => "not_promised",
            Rejection::InventedDate => "invented_date",
            Rejection::FirstPerson => "first_person",
            Rejection::Vaguer => "vaguer",
            Rejection::SecondPerson => "second_person",
        }
    }
}
