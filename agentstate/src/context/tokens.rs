//! Token counting: the [`TokenCounter`] trait, the fast default [`Estimate`], and what of a
//! [`Message`] is counted.

use super::media::MediaTokens;
use crate::message::{ContentBlock, Message};

/// Tokens a chat format adds around each message (role, separators), as OpenAI documents for
/// its chat models: about 3 per message.
pub const MESSAGE_OVERHEAD: u32 = 3;

/// Counts the tokens of a text, and of a message as a model would be sent it.
///
/// Implement [`count`](TokenCounter::count); [`count_message`](TokenCounter::count_message)
/// counts the parts of a message that are sent (text, tool results, tool calls' names and
/// arguments, reasoning, and media by [`media`](TokenCounter::media)'s rules: see
/// [`MediaTokens`]) plus [`MESSAGE_OVERHEAD`].
///
/// ```
/// use agentstate::context::{Estimate, TokenCounter};
/// use agentstate::message::{Message, Role};
///
/// let counter = Estimate::default();
/// assert!(counter.count("Hello, world!") >= 3);
/// let m = Message::text_message("Hello, world!", Role::User);
/// assert_eq!(counter.count_message(&m), counter.count("Hello, world!") + 3);
/// ```
pub trait TokenCounter {
    /// The number of tokens of `text`.
    fn count(&self, text: &str) -> u32;

    /// How media blocks are counted (default [`MediaTokens::default`]).
    fn media(&self) -> MediaTokens {
        MediaTokens::default()
    }

    /// The number of tokens `message` takes in a prompt.
    fn count_message(&self, message: &Message) -> u32 {
        let mut total = MESSAGE_OVERHEAD.saturating_add(self.count(&message.text()));
        let calls = message.tool_calls();
        for call in calls {
            total = total
                .saturating_add(self.count(call.name()))
                .saturating_add(self.count(&call.function.arguments))
                .saturating_add(MESSAGE_OVERHEAD);
        }
        for block in &message.content {
            let extra = match block {
                // Calls held only as blocks are sent as calls too; with `tools_calls` they
                // duplicate it and are not counted twice.
                ContentBlock::ToolCall(call) if calls.is_empty() => {
                    let args = serde_json::to_string(&call.args).unwrap_or_default();
                    self.count(&call.name)
                        .saturating_add(self.count(&args))
                        .saturating_add(MESSAGE_OVERHEAD)
                }
                ContentBlock::Reasoning(reasoning) => self.count(&reasoning.summary),
                ContentBlock::Document(document) => {
                    let text = document.text.as_deref().map_or(0, |text| self.count(text));
                    self.media().block(block, text)
                }
                ContentBlock::Image(_) | ContentBlock::Audio(_) | ContentBlock::Video(_) => {
                    self.media().block(block, 0)
                }
                ContentBlock::Error(error) => self.count(&error.message),
                _ => 0,
            };
            total = total.saturating_add(extra);
        }
        total
    }
}

impl<C: TokenCounter + ?Sized> TokenCounter for &C {
    fn count(&self, text: &str) -> u32 {
        (**self).count(text)
    }
    fn count_message(&self, message: &Message) -> u32 {
        (**self).count_message(message)
    }
    fn media(&self) -> MediaTokens {
        (**self).media()
    }
}

/// The fast default estimate: one pass over the bytes, no vocabulary.
///
/// It mimics a BPE tokenizer's pre-tokenization: the text is cut into runs of one kind of
/// character (a word, a number, punctuation, a run of line breaks; spaces join the word they
/// precede, but a space before digits, a symbol or an unfitted script is a token of its own),
/// and a run costs its characters divided by the characters one token covers for its kind,
/// rounded up:
///
/// | run | characters per token |
/// |---|---:|
/// | Latin letters and `_`, each weighed by how common it is after the letter before it in English and code (below) | 16 common letters; 0.7 of rare pairs |
/// | a word with a Latin-1 accented letter (French, Spanish, German...) | 4 weighed letters |
/// | a word with a Latin Extended letter (Polish, Turkish, Vietnamese...) | 2.75 weighed letters |
/// | digits, punctuation (ASCII, U+2000–U+203F; a backslash counts 1.5) | 3 |
/// | Cyrillic (letters beyond Russian's weigh 1.75) | 3.5 |
/// | Armenian, Arabic (Urdu, Persian), Georgian, Devanagari | 3 |
/// | Bengali | 2.75 |
/// | Greek, Hebrew | 2.6, 2.5 |
/// | Thai | 2.2 |
/// | Gurmukhi, Gujarati, Tamil, Telugu, Kannada, Malayalam; Sinhala | 2; 1.8 |
/// | Chinese, Japanese, Korean (and their punctuation) | 1.06 |
/// | symbols (Latin-1 signs, box drawing, dingbats; letterlike, arrows and mathematics 1.5 a token) | 1 |
/// | emoji | 0.5 |
/// | any other script (Ethiopic, Khmer, Myanmar, Tibetan, Lao, Oriya, Syriac, N'Ko, Cherokee, IPA, combining marks...) | a token per UTF-8 byte |
/// | a run of line breaks | the whole run |
///
/// A BPE vocabulary learnt mostly from English and code keeps its common words whole and cuts
/// words of other languages and random letters finer, where their pairs of letters are rare in
/// English. So a small ASCII letter weighs 7/16 of a character after a letter it commonly
/// follows in English and code, and 4.5/16 more per quarter bit of surprise above 4 bits
/// (`-log2` of its probability after the letter before it, counted on 23 MB of crates.io Rust
/// sources: identifiers and English comments), at most 10 characters (random letters are 1.7 to
/// 1.9 characters a token); a capital after a small letter (`camelCase`) weighs a character
/// more and starts the pairs again. A word costs its weight over 7 characters.
///
/// A run of 16 or more base64 or hex characters that switches between letters and digits at
/// least once in four characters (data, not an identifier) costs at least 0.75 tokens a
/// character (mixed case: base64) or 0.625 (hex).
///
/// An estimate under the real count lets a view overflow the window, so the estimate errs high
/// where it cannot be exact: a script it has no rate for costs a token per byte, the most a
/// byte-level BPE can take. Against OpenAI's `o200k_base` (`tests/context_languages.rs`, tables
/// in `benches/README.md`): within 25% over and 5% under on natural text of the ten most
/// spoken languages, code and JSON (English +17%, code +11%; about 7% over on a whole agent
/// conversation), and never more than 5% under on 70 other texts (scripts, other
/// Latin-script languages, emoji, base64, hex, JSON tool results, logs, SQL, mathematics,
/// random letters and ASCII), nor on 13 held out, not fitted on (Finnish, Estonian, Tagalog,
/// Zulu, Dutch, Latvian, Welsh, Basque, Slovak, Bulgarian, base32, random letters: the worst
/// +1.9%). It cannot be exact on a language it was not measured on: a Latin-script language
/// whose words are rarer in the vocabulary than their letter pairs tell may still be under.
/// [Calibration](super::ContextWindow::calibrated) corrects what is left with the provider's
/// own counts; `Bpe` (feature `tokenizer`) is exact. Media blocks are counted by
/// [`media`](Estimate::media).
///
/// ```
/// use agentstate::context::{Estimate, TokenCounter};
///
/// let estimate = Estimate::default();
/// assert_eq!(estimate.count(""), 0);
/// assert_eq!(estimate.count("hello world"), 3); // o200k_base: 2 (`rl` is rare in English)
/// assert_eq!(estimate.count("{\"city\": \"Paris\"}"), 6); // o200k_base: 6 too
/// assert_eq!(estimate.count("Привет, мир"), 4); // o200k_base: 4 too
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Estimate {
    /// How media blocks are counted.
    pub media: MediaTokens,
}

/// The kind of character run [`Estimate`] is in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Run {
    Space,
    Newline,
    Letters,
    Digits,
    Punctuation,
    Cyrillic,
    Alphabet,
    Hebrew,
    Greek,
    Indic,
    Bengali,
    Brahmic,
    Thai,
    Cjk,
    /// Symbols and emoji: about a token each.
    Symbol,
    /// Scripts the rates were not fitted on: a token per UTF-8 byte, the most a byte-level
    /// BPE can take (conservative: an estimate under the real count overflows windows).
    Bytes,
}

impl Run {
    /// Sixteenths of a character one token covers (a character counts 16; a byte of an
    /// unfitted script 16).
    fn per_token(self) -> u32 {
        match self {
            Run::Letters => 112,
            Run::Cyrillic => 56,
            Run::Bengali => 44,
            Run::Hebrew => 40,
            Run::Greek => 42,
            Run::Thai => 35,
            Run::Brahmic => 32,
            Run::Cjk => 17,
            Run::Digits | Run::Punctuation | Run::Alphabet | Run::Indic => 48,
            Run::Symbol | Run::Bytes => 16,
            // A run of line breaks is one token; spaces cost nothing.
            Run::Newline => u32::MAX,
            Run::Space => 1,
        }
    }
}

/// The kind and weight (sixteenths of a character) of the character whose first byte is at
/// `i` of `bytes`, `None` for a continuation byte.
fn classify(bytes: &[u8], i: usize) -> Option<(Run, u32)> {
    let byte = bytes[i];
    let next = bytes.get(i + 1).copied().unwrap_or(0);
    let width = match byte {
        0x00..=0x7f => 1,
        0x80..=0xbf => return None,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    };
    let per_byte = (Run::Bytes, 16 * width);
    Some(match byte {
        b'a'..=b'z' | b'A'..=b'Z' | b'_' => (Run::Letters, 16),
        b'0'..=b'9' => (Run::Digits, 16),
        b' ' | b'\t' => (Run::Space, 0),
        b'\n' | b'\r' => (Run::Newline, 16),
        // A backslash escape (`\"`, `\n`, `\u00e9`) splits what it is in.
        b'\\' => (Run::Punctuation, 24),
        0x00..=0x7f => (Run::Punctuation, 16),
        // Latin-1 punctuation and signs (U+0080–U+00BF: `°`, `²`, `«`).
        0xc2 => (Run::Symbol, 16),
        // Accented Latin letters (U+00C0–U+00FF): a word with one costs more (see `count`);
        // more for those of Latin Extended (U+0100–U+024F: Polish, Turkish, Vietnamese...).
        0xc3 => (Run::Letters, 24),
        0xc4..=0xc8 => (Run::Letters, 25),
        0xc9 if next < 0x90 => (Run::Letters, 25),
        // IPA, spacing modifiers, combining marks (U+0250–U+036F).
        0xc9..=0xcc => per_byte,
        0xcd if next < 0xb0 => per_byte,
        0xcd..=0xcf => (Run::Greek, 16),
        // Cyrillic letters beyond Russian's (Serbian `ђ ј љ њ ћ џ`, Ukrainian `є і ї`...)
        // split a word finer.
        0xd0 if (0x80..0x90).contains(&next) => (Run::Cyrillic, 28),
        0xd1 if (0x90..0xa0).contains(&next) => (Run::Cyrillic, 28),
        0xd0..=0xd3 => (Run::Cyrillic, 16),
        0xd4 if next < 0xb0 => (Run::Cyrillic, 16),
        // Armenian.
        0xd4..=0xd5 => (Run::Alphabet, 16),
        0xd6 if next < 0x90 => (Run::Alphabet, 16),
        0xd6..=0xd7 => (Run::Hebrew, 16),
        // Arabic (Urdu, Persian).
        0xd8..=0xdb => (Run::Alphabet, 16),
        // Syriac, Thaana, N'Ko...
        0xdc..=0xdf => per_byte,
        0xe0 => match next {
            0xa4..=0xa5 => (Run::Indic, 16),
            0xa6..=0xa7 => (Run::Bengali, 16),
            // Gurmukhi to Malayalam.
            0xa8..=0xab => (Run::Brahmic, 16),
            // Oriya.
            0xac..=0xad => per_byte,
            0xae..=0xb5 => (Run::Brahmic, 16),
            // Sinhala.
            0xb6..=0xb7 => (Run::Brahmic, 18),
            0xb8..=0xb9 => (Run::Thai, 16),
            _ => per_byte,
        },
        0xe1 => match next {
            // Georgian.
            0x82..=0x83 => (Run::Alphabet, 16),
            // Hangul Jamo.
            0x84..=0x87 => (Run::Cjk, 16),
            // Latin Extended Additional (Vietnamese).
            0xb8..=0xbb => (Run::Letters, 25),
            // Greek Extended.
            0xbc..=0xbf => (Run::Greek, 16),
            _ => per_byte,
        },
        // General punctuation (quotes, dashes; U+2000–U+203F).
        0xe2 if next == 0x80 => (Run::Punctuation, 16),
        // Letterlike symbols, number forms, arrows, mathematical operators (U+2100–U+22FF):
        // many are two tokens.
        0xe2 if (0x84..0x8c).contains(&next) => (Run::Symbol, 24),
        // Currency, arrows, mathematical operators, box drawing, dingbats...
        0xe2 => (Run::Symbol, 16),
        0xe3..=0xed => (Run::Cjk, 16),
        // Variation selectors (an emoji's presentation).
        0xef if next == 0xb8 => (Run::Symbol, 16),
        0xef => (Run::Cjk, 16),
        // Emoji and pictographs (U+1F000–U+1FFFF): about two tokens each.
        0xf0 if next == 0x9f => (Run::Symbol, 32),
        _ => per_byte,
    })
}

impl TokenCounter for Estimate {
    fn media(&self) -> MediaTokens {
        self.media
    }

    fn count(&self, text: &str) -> u32 {
        let bytes = text.as_bytes();
        let mut tokens: u32 = 0;
        let mut run = Run::Space;
        let mut len = 0u32;
        // A word with an accented letter is in a language the vocabulary covers less well:
        // the heaviest letter weight in the current run.
        let mut foreign = 0u32;
        let mut lower = false;
        // The current run of base64 or hex characters (no spaces), and the tokens before it.
        let mut blob = Blob::default();
        // The row of `LETTER` for the next small letter: the letter before it.
        let mut prev = START;
        let cost = |run: Run, len: u32, foreign: u32| match run {
            Run::Space => 0,
            // Latin Extended letters weigh 25: a word with one is counted at 2.75 common
            // letters a token; with only Latin-1 accents, 4.
            Run::Letters if foreign >= 25 => len.div_ceil(44),
            Run::Letters if foreign > 16 => len.div_ceil(64),
            run => len.div_ceil(run.per_token()),
        };
        for i in 0..bytes.len() {
            let byte = bytes[i];
            // The common case: one more small letter of a word.
            if byte.is_ascii_lowercase() && run == Run::Letters {
                blob.push(1, tokens);
                lower = true;
                let c = usize::from(byte - b'a');
                len = len.saturating_add(u32::from(LETTER[prev][c]));
                prev = c;
                continue;
            }
            let Some((next, weight)) = classify(bytes, i) else {
                continue;
            };
            let kind = DATA[usize::from(byte)];
            if blob.len > 0 && kind == 0 {
                if blob.qualifies() {
                    tokens = tokens.saturating_add(cost(run, len, foreign));
                    len = 0;
                    prev = START;
                    foreign = 0;
                }
                tokens = blob.end(tokens);
            }
            if kind != 0 {
                blob.push(kind, tokens);
            }
            if next != run {
                tokens = tokens.saturating_add(cost(run, len, foreign));
                prev = START;
                // A space before digits, a symbol or an unfitted script is a token of its own.
                if run == Run::Space
                    && i > 0
                    && matches!(next, Run::Digits | Run::Symbol | Run::Bytes)
                {
                    tokens = tokens.saturating_add(1);
                }
                run = next;
                len = 0;
                foreign = 0;
            }
            let weight = if next == Run::Letters {
                foreign = foreign.max(weight);
                if byte.is_ascii_alphabetic() {
                    // A capital after a small letter (`camelCase`) often starts a token: it
                    // weighs a letter more and starts a word of its own.
                    let camel = lower && byte.is_ascii_uppercase();
                    if camel {
                        prev = START;
                    }
                    let c = usize::from((byte | 32) - b'a');
                    let letter = u32::from(LETTER[prev][c]);
                    prev = c;
                    if camel {
                        letter + 16
                    } else {
                        letter
                    }
                } else {
                    // `_` and accented letters: the next letter starts a word.
                    prev = START;
                    weight
                }
            } else {
                weight
            };
            lower = byte.is_ascii_lowercase();
            len = len.saturating_add(weight);
        }
        tokens = tokens.saturating_add(cost(run, len, foreign));
        blob.end(tokens)
    }
}

/// How surprising each small ASCII letter is after another in English and code: `-log2` of
/// its probability given the letter before it (row 26: at the start of a word), in quarter
/// bits. Counted by `benches/letter_bigrams.py` on 23 MB of Rust sources of crates.io crates
/// (their identifiers and English comments), a word split at a `camelCase` capital.
const SURPRISAL: [[u8; 26]; 27] = [
    [
        39, 22, 15, 18, 38, 25, 22, 40, 21, 48, 28, 13, 18, 14, 48, 19, 49, 11, 14, 10, 23, 29, 24,
        26, 23, 36,
    ], // a
    [
        16, 36, 23, 33, 14, 36, 40, 49, 10, 27, 47, 13, 32, 42, 14, 30, 67, 19, 22, 23, 8, 36, 48,
        45, 16, 59,
    ], // b
    [
        15, 39, 25, 34, 15, 20, 37, 14, 16, 59, 17, 17, 27, 34, 7, 27, 35, 15, 24, 14, 24, 31, 43,
        33, 30, 59,
    ], // c
    [
        18, 31, 33, 19, 4, 26, 15, 36, 12, 43, 46, 23, 33, 36, 15, 28, 43, 19, 20, 27, 24, 31, 38,
        34, 22, 58,
    ], // d
    [
        18, 19, 18, 16, 25, 24, 27, 39, 32, 49, 35, 14, 21, 11, 33, 24, 22, 10, 14, 14, 34, 22, 25,
        18, 27, 52,
    ], // e
    [
        16, 38, 30, 22, 14, 18, 18, 52, 11, 70, 46, 13, 23, 13, 10, 34, 47, 17, 18, 24, 18, 51, 38,
        48, 29, 76,
    ], // f
    [
        23, 36, 30, 39, 4, 38, 28, 20, 15, 62, 43, 23, 27, 18, 22, 31, 42, 17, 12, 22, 18, 35, 40,
        42, 31, 39,
    ], // g
    [
        9, 36, 36, 29, 5, 37, 48, 50, 12, 61, 38, 36, 27, 38, 12, 38, 52, 20, 28, 19, 24, 39, 30,
        67, 28, 37,
    ], // h
    [
        21, 27, 18, 17, 19, 17, 22, 50, 38, 52, 35, 19, 18, 7, 14, 24, 46, 25, 15, 12, 47, 21, 55,
        30, 67, 19,
    ], // i
    [
        20, 40, 37, 48, 5, 31, 32, 26, 19, 54, 24, 42, 33, 38, 9, 28, 54, 37, 10, 27, 14, 54, 54,
        45, 48, 54,
    ], // j
    [
        22, 31, 27, 29, 3, 30, 32, 35, 11, 67, 47, 30, 32, 20, 31, 30, 38, 32, 17, 22, 25, 32, 37,
        32, 35, 52,
    ], // k
    [
        12, 34, 37, 16, 9, 13, 34, 44, 11, 79, 35, 14, 35, 36, 12, 31, 54, 37, 20, 18, 19, 36, 35,
        60, 22, 53,
    ], // l
    [
        9, 24, 29, 26, 9, 38, 38, 41, 16, 59, 40, 29, 23, 30, 14, 12, 39, 36, 15, 22, 12, 43, 50,
        47, 34, 59,
    ], // m
    [
        18, 38, 18, 13, 12, 20, 13, 39, 21, 50, 27, 20, 40, 24, 16, 26, 50, 30, 10, 10, 23, 28, 29,
        49, 28, 48,
    ], // n
    [
        30, 29, 18, 20, 34, 21, 24, 46, 25, 37, 20, 20, 16, 7, 20, 16, 62, 11, 20, 18, 17, 26, 21,
        31, 46, 49,
    ], // o
    [
        12, 40, 31, 35, 12, 26, 37, 27, 20, 64, 33, 16, 34, 42, 16, 22, 48, 14, 24, 13, 7, 31, 43,
        48, 23, 60,
    ], // p
    [
        36, 39, 38, 27, 24, 43, 29, 57, 35, 63, 63, 8, 31, 33, 28, 34, 63, 30, 28, 42, 2, 41, 37,
        63, 63, 49,
    ], // q
    [
        11, 36, 24, 23, 8, 28, 17, 44, 14, 70, 31, 29, 22, 19, 14, 29, 47, 17, 18, 16, 18, 28, 34,
        35, 22, 54,
    ], // r
    [
        21, 39, 21, 36, 8, 39, 22, 19, 15, 50, 27, 26, 29, 34, 20, 18, 26, 29, 17, 7, 18, 38, 37,
        45, 20, 42,
    ], // s
    [
        15, 42, 23, 24, 9, 30, 42, 12, 13, 70, 41, 27, 29, 36, 15, 26, 51, 11, 21, 18, 19, 39, 36,
        31, 14, 48,
    ], // t
    [
        28, 8, 21, 27, 16, 24, 16, 59, 17, 63, 56, 17, 21, 14, 34, 22, 62, 15, 14, 12, 33, 51, 59,
        23, 62, 50,
    ], // u
    [
        7, 39, 24, 31, 4, 23, 43, 35, 14, 71, 52, 23, 25, 28, 21, 35, 47, 34, 29, 30, 51, 56, 42,
        24, 51, 41,
    ], // v
    [
        10, 45, 33, 30, 14, 38, 43, 13, 7, 49, 47, 28, 33, 16, 16, 35, 41, 11, 23, 31, 43, 50, 31,
        39, 49, 70,
    ], // w
    [
        14, 28, 19, 20, 16, 19, 41, 17, 18, 50, 48, 19, 26, 36, 27, 9, 30, 30, 23, 7, 29, 32, 34,
        27, 25, 66,
    ], // x
    [
        35, 26, 30, 37, 23, 35, 36, 45, 25, 60, 56, 22, 24, 11, 21, 5, 69, 31, 11, 13, 48, 40, 31,
        53, 39, 38,
    ], // y
    [
        21, 45, 32, 55, 1, 36, 38, 38, 20, 58, 44, 40, 36, 45, 26, 48, 49, 51, 30, 44, 41, 32, 43,
        49, 24, 32,
    ], // z
    [
        16, 18, 14, 18, 18, 16, 27, 25, 15, 40, 28, 20, 18, 19, 20, 14, 31, 19, 14, 14, 16, 23, 22,
        29, 40, 37,
    ], // _
];

/// The weight (sixteenths of a character) of each small ASCII letter after another (row: the
/// letter before it; row 26: none, the start of a word or after an accent, `_` or a `camelCase`
/// capital): 7 where English and code make the pair common, growing by 4.5 a quarter bit of
/// [`SURPRISAL`] above 4 bits, to at most 160 (a pair of letters English never has: BPE
/// vocabularies are English-heavy, so words of rare pairs split into more tokens).
const LETTER: [[u8; 26]; 27] = {
    let mut table = [[0u8; 26]; 27];
    let mut p = 0;
    while p < 27 {
        let mut c = 0;
        while c < 26 {
            let s = SURPRISAL[p][c] as u32;
            let above = s.saturating_sub(16);
            let weight = 7 + above * 18 / 4;
            table[p][c] = if weight > 160 { 160 } else { weight as u8 };
            c += 1;
        }
        p += 1;
    }
    table
};

/// The row of [`LETTER`] for a letter that starts a word.
const START: usize = 26;

/// Each byte's kind as a character of base64 or hex: 0 none, 1 small letter, 2 capital,
/// 3 digit, 4 sign (`+`, `/`, `=`).
const DATA: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = match b as u8 {
            b'a'..=b'z' => 1,
            b'A'..=b'Z' => 2,
            b'0'..=b'9' => 3,
            b'+' | b'/' | b'=' => 4,
            _ => 0,
        };
        b += 1;
    }
    table
};

/// A run of base64 or hex characters: tokenized far finer than words (about 0.7 tokens a
/// character for base64, 0.6 for hex), so a long one costs at least that.
#[derive(Default)]
struct Blob {
    len: u32,
    /// The kinds of character seen (bit `1 << kind` of [`DATA`]'s kinds).
    seen: u8,
    /// How often the kind of character (small, capital, digit, sign) changes in it, and the
    /// kind of its last character.
    switches: u32,
    last: u8,
    /// The tokens counted before it.
    before: u32,
}

impl Blob {
    #[inline(always)]
    fn push(&mut self, kind: u8, tokens: u32) {
        if self.len == 0 {
            self.before = tokens;
            self.last = kind;
        }
        self.len += 1;
        self.switches += u32::from(kind != self.last);
        self.last = kind;
        self.seen |= 1 << kind;
    }

    /// Whether it is long and mixed enough to be data rather than words (an identifier such
    /// as `computeSHA256Digest` changes kind of character far less often).
    fn qualifies(&self) -> bool {
        let letters = self.seen & 0b110 != 0;
        self.len >= 16 && self.seen & 0b1000 != 0 && letters && self.switches * 4 >= self.len
    }

    /// The tokens counted so far, at least the blob's floor when it ends here.
    fn end(&mut self, tokens: u32) -> u32 {
        let blob = std::mem::take(self);
        if !blob.qualifies() {
            return tokens;
        }
        // Sixteenths of a token per character: mixed case is base64, one case hex.
        let rate = if blob.seen & 0b110 == 0b110 { 12 } else { 10 };
        let floor = blob.before.saturating_add((blob.len * rate).div_ceil(16));
        tokens.max(floor)
    }
}

/// Counts characters divided by four, rounded up: AgentFlow's estimate, kept for comparison.
///
/// ```
/// use agentstate::context::{CharsOver4, TokenCounter};
///
/// assert_eq!(CharsOver4.count("hello world"), 3);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CharsOver4;

impl TokenCounter for CharsOver4 {
    fn count(&self, text: &str) -> u32 {
        u32::try_from(text.chars().count().div_ceil(4)).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Role, ToolCall};
    use serde_json::json;

    #[test]
    fn estimate_counts_pieces() {
        let e = Estimate::default();
        assert_eq!(e.count("a"), 1);
        assert_eq!(e.count("internationalization"), 2, "common English pairs");
        assert_eq!(
            e.count("qzxjv"),
            7,
            "pairs English never has: a token a letter or more"
        );
        assert_eq!(e.count("snake_case_name"), 3, "`_` joins the word");
        assert_eq!(e.count("12345"), 2);
        assert_eq!(e.count("a\n\n\nb"), 3);
        assert_eq!(
            e.count("héllo"),
            2,
            "a word with an accented letter: 4 characters a token"
        );
        assert_eq!(e.count("łódź"), 3, "with a Latin Extended letter: 2.75");
        assert_eq!(
            e.count("computeSHA256Digest"),
            3,
            "an identifier is not base64"
        );
        assert_eq!(e.count(" 42"), 2, "a space before digits is a token");
        assert_eq!(e.count("ሰላም"), 9, "an unfitted script: a token a byte");
        assert_eq!(e.count("👍🏽"), 4, "emoji: about two tokens each");
        let base64 = "aGVsbG8gd29ybGQsIHRoaXMgaXMgYmFzZTY0IHRleHQ=";
        assert_eq!(e.count(base64), (base64.len() as u32 * 12).div_ceil(16));
        assert_eq!(e.count("слово"), 2, "five Cyrillic letters, 3.5 per token");
        assert!(
            e.count("ћћћћћ") > e.count("ррррр"),
            "Serbian letters weigh more"
        );
        assert_eq!(e.count("你好世界"), 4);
        assert_eq!(e.count("“quoted”"), 4, "curly quotes are punctuation");
        assert_eq!(e.count("!!"), 1);
        assert_eq!(
            e.count("});\n"),
            2,
            "one run of punctuation, one line break"
        );
    }

    /// A PNG of `width` × `height` whose base64 is about `kb` kilobytes (a header, then zeros).
    fn png(width: u32, height: u32, kb: usize) -> String {
        let mut bytes = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        bytes.extend(width.to_be_bytes());
        bytes.extend(height.to_be_bytes());
        bytes.resize(kb * 1024 / 4 * 3, 0);
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for c in bytes.chunks(3) {
            let v = u32::from(c[0]) << 16
                | u32::from(*c.get(1).unwrap_or(&0)) << 8
                | u32::from(*c.get(2).unwrap_or(&0));
            for k in 0..4 {
                out.push(A[(v >> (18 - 6 * k) & 63) as usize] as char);
            }
        }
        out
    }

    /// The issue's measurement: a 220 kB base64 image counted 3 tokens (the message overhead).
    #[test]
    fn images_count_by_the_providers_rules() {
        use crate::context::media::ImageRule;
        use crate::message::MediaRef;
        let data = png(1920, 1080, 220);
        assert!(data.len() >= 220 * 1024);
        let m = Message::new(
            Role::User,
            vec![ContentBlock::image(MediaRef::data(data, "image/png"))],
        );
        // Anthropic: scaled to 1568 × 882, 1,844 tokens, bounded to 1,600; larger than
        // OpenAI's 1,105 (1365 × 768: 6 tiles).
        assert_eq!(
            Estimate::default().count_message(&m),
            MESSAGE_OVERHEAD + 1_600
        );
        let openai = Estimate {
            media: MediaTokens {
                image: ImageRule::OpenAi { low_detail: false },
                ..MediaTokens::default()
            },
        };
        assert_eq!(openai.count_message(&m), MESSAGE_OVERHEAD + 1_105);
        // By URL, the size unknown: the default dimensions.
        let url = Message::new(
            Role::User,
            vec![ContentBlock::image(MediaRef::url("https://x/cat.png"))],
        );
        assert_eq!(openai.count_message(&url), MESSAGE_OVERHEAD + 765);
    }

    #[test]
    fn messages_count_calls_once() {
        let e = Estimate::default();
        let call = ToolCall::new("c1", "get_weather", json!({"city": "Paris"}));
        let m = Message::text_message("", Role::Assistant).with_tool_calls(vec![call.clone()]);
        let expected = MESSAGE_OVERHEAD
            + e.count("get_weather")
            + e.count(&call.function.arguments)
            + MESSAGE_OVERHEAD;
        assert_eq!(e.count_message(&m), expected);
        // Held only as a block, the call is counted from the block.
        let block_only = Message::new(
            Role::Assistant,
            vec![ContentBlock::ToolCall(call.to_block())],
        );
        assert_eq!(
            e.count_message(&block_only),
            MESSAGE_OVERHEAD
                + e.count("get_weather")
                + e.count(r#"{"city":"Paris"}"#)
                + MESSAGE_OVERHEAD
        );
    }
}
