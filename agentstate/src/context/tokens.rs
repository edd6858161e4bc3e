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
/// | Latin letters and `_` (a capital after a small letter counts 1.25) | 7 |
/// | a word with a Latin-1 accented letter (French, Spanish, German...) | 3.5 |
/// | a word with a Latin Extended letter (Polish, Turkish, Vietnamese...) | 1.75 |
/// | digits, punctuation (ASCII, U+2000–U+203F; a backslash counts 1.5) | 3 |
/// | Cyrillic | 3.5 |
/// | Armenian, Arabic (Urdu, Persian), Georgian, Devanagari | 3 |
/// | Bengali | 2.75 |
/// | Greek, Hebrew | 2.6, 2.5 |
/// | Thai | 2.2 |
/// | Gurmukhi, Gujarati, Tamil, Telugu, Kannada, Malayalam; Sinhala | 2; 1.8 |
/// | Chinese, Japanese, Korean (and their punctuation) | 1.06 |
/// | symbols (Latin-1 signs, arrows, mathematics, box drawing, dingbats) | 1 |
/// | emoji | 0.5 |
/// | any other script (Ethiopic, Khmer, Myanmar, Tibetan, Lao, Oriya, Syriac, N'Ko, Cherokee, IPA, combining marks...) | a token per UTF-8 byte |
/// | a run of line breaks | the whole run |
///
/// A run of 16 or more base64 or hex characters that switches between letters and digits at
/// least once in four characters (data, not an identifier) costs at least 0.75 tokens a
/// character (mixed case: base64) or 0.625 (hex).
///
/// An estimate under the real count lets a view overflow the window, so the estimate errs high
/// where it cannot be exact: a script it has no rate for costs a token per byte, the most a
/// byte-level BPE can take. Against OpenAI's `o200k_base` (`tests/context_languages.rs`, tables
/// in `benches/README.md`): within 25% over and 5% under on natural text of the ten most
/// spoken languages, code and JSON (about 4% over on a whole agent conversation), and never
/// more than 5% under on 62 of 68 other texts (scripts, emoji, base64, hex, JSON tool
/// results, logs, SQL). It is under by more on text whose words the vocabulary splits finer
/// than it can tell without the vocabulary: other Latin-script languages (Hungarian -23%,
/// Indonesian -21%, Swahili -28%, Icelandic -12%), Serbian (-7%), mathematical notation
/// (-12%), random letters (-63%). [Calibration](super::ContextWindow::calibrated) corrects
/// what is left with the provider's own counts; `Bpe` (feature `tokenizer`) is exact. Media
/// blocks are counted by [`media`](Estimate::media).
///
/// ```
/// use agentstate::context::{Estimate, TokenCounter};
///
/// let estimate = Estimate::default();
/// assert_eq!(estimate.count(""), 0);
/// assert_eq!(estimate.count("hello world"), 2);
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
        let cost = |run: Run, len: u32, foreign: u32| match run {
            Run::Space => 0,
            // Latin Extended letters weigh 25: a word with one is counted at 1.75
            // characters a token; with only Latin-1 accents, 3.5.
            Run::Letters if foreign >= 25 => len.div_ceil(28),
            Run::Letters if foreign > 16 => len.div_ceil(56),
            run => len.div_ceil(run.per_token()),
        };
        for i in 0..bytes.len() {
            let byte = bytes[i];
            // The common case: one more small letter of a word.
            if byte.is_ascii_lowercase() && run == Run::Letters {
                blob.push(1, tokens);
                lower = true;
                len = len.saturating_add(16);
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
                    foreign = 0;
                }
                tokens = blob.end(tokens);
            }
            if kind != 0 {
                blob.push(kind, tokens);
            }
            if next != run {
                tokens = tokens.saturating_add(cost(run, len, foreign));
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
            if next == Run::Letters {
                foreign = foreign.max(weight);
            }
            // A capital after a small letter (`camelCase`) often starts a token.
            let weight = if lower && byte.is_ascii_uppercase() {
                weight + 4
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
        assert_eq!(e.count("internationalization"), 3);
        assert_eq!(e.count("snake_case_name"), 3, "`_` joins the word");
        assert_eq!(e.count("12345"), 2);
        assert_eq!(e.count("a\n\n\nb"), 3);
        assert_eq!(
            e.count("héllo"),
            2,
            "a word with an accented letter: 3.5 characters a token"
        );
        assert_eq!(e.count("łódź"), 4, "with a Latin Extended letter: 1.75");
        assert_eq!(
            e.count("computeSHA256Digest"),
            4,
            "an identifier is not base64"
        );
        assert_eq!(e.count(" 42"), 2, "a space before digits is a token");
        assert_eq!(e.count("ሰላም"), 9, "an unfitted script: a token a byte");
        assert_eq!(e.count("👍🏽"), 4, "emoji: about two tokens each");
        let base64 = "aGVsbG8gd29ybGQsIHRoaXMgaXMgYmFzZTY0IHRleHQ=";
        assert_eq!(e.count(base64), (base64.len() as u32 * 12).div_ceil(16));
        assert_eq!(e.count("слово"), 2, "five Cyrillic letters, four per token");
        assert_eq!(e.count("你好世界"), 4);
        assert_eq!(e.count("“quoted”"), 3, "curly quotes are punctuation");
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
