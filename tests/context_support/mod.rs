//! A realistic conversation for the context window's tests and benchmark: prose from a frozen
//! copy of the project's README (`tests/data/context_prose.md`, so that editing the README does
//! not move the tests' thresholds), code from the context module's own sources, JSON tool arguments and
//! results, parallel tool calls. Deterministic: the same `turns` always give the same history.

#![allow(dead_code)] // Each including crate uses part of it.

use agentstate::message::{Message, Role, ToolCall};
use serde_json::json;

const PROSE: &str = include_str!("../data/context_prose.md");
const CODE: [&str; 4] = [
    include_str!("../../agentstate/src/context/window.rs"),
    include_str!("../../agentstate/src/context/index.rs"),
    include_str!("../../agentstate/src/context/tokens.rs"),
    include_str!("../../agentstate/src/context/view.rs"),
];

/// Natural text of the ten most spoken languages (Ethnologue's ranking by total speakers:
/// English, Mandarin Chinese, Hindi, Spanish, French, Arabic, Bengali, Portuguese, Russian,
/// Urdu), code and JSON, a paragraph or so each (`tests/data/languages`): self-written
/// translations of one English paragraph, so that every language says the same; the code is
/// Rust, Python and JavaScript, the JSON an API response, pretty-printed and compact.
pub const LANGUAGES: [(&str, &str); 12] = [
    ("English", include_str!("../data/languages/en.txt")),
    ("Mandarin Chinese", include_str!("../data/languages/zh.txt")),
    ("Hindi", include_str!("../data/languages/hi.txt")),
    ("Spanish", include_str!("../data/languages/es.txt")),
    ("French", include_str!("../data/languages/fr.txt")),
    ("Arabic", include_str!("../data/languages/ar.txt")),
    ("Bengali", include_str!("../data/languages/bn.txt")),
    ("Portuguese", include_str!("../data/languages/pt.txt")),
    ("Russian", include_str!("../data/languages/ru.txt")),
    ("Urdu", include_str!("../data/languages/ur.txt")),
    (
        "Code (Rust, Python, JS)",
        include_str!("../data/languages/code.txt"),
    ),
    ("JSON", include_str!("../data/languages/json.txt")),
];

/// The README's paragraphs (prose, lists, tables), each non-empty.
pub fn paragraphs() -> Vec<&'static str> {
    PROSE
        .split("\n\n")
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

/// Chunks of about 600 bytes of source code, cut at line ends.
pub fn code_chunks() -> Vec<&'static str> {
    let mut chunks = Vec::new();
    for source in CODE {
        let mut start = 0;
        while start < source.len() {
            let mut end = (start + 600).min(source.len());
            while end < source.len() && !source.is_char_boundary(end) {
                end += 1;
            }
            end = source[end..]
                .find('\n')
                .map_or(source.len(), |i| end + i + 1);
            chunks.push(&source[start..end]);
            start = end;
        }
    }
    chunks
}

/// The kind of text each message of [`conversation`] carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Prose,
    Code,
    Json,
}

/// A conversation of `turns` turns after a system message: each turn a user question (prose),
/// then on two turns of three an assistant message with one to three parallel tool calls (JSON
/// arguments) and their results (code or JSON), then an answer (prose).
pub fn conversation(turns: usize) -> Vec<Message> {
    let prose = paragraphs();
    let code = code_chunks();
    let mut history = vec![Message::text_message(
        "You are agentstate's assistant. Answer from the documentation and the code; call tools \
         to search them. Be precise and brief.",
        Role::System,
    )
    .with_id("system")];
    let mut n = 0usize;
    let mut next = |m: Message| {
        n += 1;
        m.with_id(format!("m{n}"))
    };
    for turn in 0..turns {
        let question = prose[(turn * 7) % prose.len()];
        history.push(next(Message::text_message(question, Role::User)));
        if turn % 3 != 2 {
            let k = 1 + turn % 3;
            let calls: Vec<ToolCall> = (0..k)
                .map(|i| {
                    let words: Vec<&str> =
                        question.split_whitespace().skip(i * 3).take(4).collect();
                    ToolCall::new(
                        format!("call_{turn}_{i}"),
                        if i % 2 == 0 {
                            "search_docs"
                        } else {
                            "read_source"
                        },
                        json!({"query": words.join(" "), "limit": 5 + i, "exact": i == 1}),
                    )
                })
                .collect();
            history.push(next(
                Message::text_message("", Role::Assistant).with_tool_calls(calls),
            ));
            for i in 0..k {
                let id = format!("call_{turn}_{i}");
                let result = if i % 2 == 0 {
                    json!({
                        "hits": [
                            {"file": "README.md", "line": turn * 3 + i, "text": prose[(turn + i) % prose.len()]},
                            {"file": "src/context/window.rs", "line": 40 + i, "score": 0.75}
                        ],
                        "total": 2
                    })
                    .to_string()
                } else {
                    code[(turn + i) % code.len()].to_owned()
                };
                history.push(next(Message::tool_result(id, result)));
            }
        }
        let answer = prose[(turn * 7 + 3) % prose.len()];
        history.push(next(Message::text_message(answer, Role::Assistant)));
    }
    history
}

/// The kind of text of each message of a conversation.
pub fn kind(message: &Message) -> Kind {
    match message.role {
        Role::Tool if message.text().starts_with('{') => Kind::Json,
        Role::Tool => Kind::Code,
        Role::Assistant if message.has_tool_calls() => Kind::Json,
        _ => Kind::Prose,
    }
}

/// The first `n` messages of a long [`conversation`].
pub fn messages(n: usize) -> Vec<Message> {
    let mut history = conversation(n / 3 + 1);
    history.truncate(n);
    history
}
