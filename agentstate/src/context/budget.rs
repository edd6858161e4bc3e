//! [`Budget`]: how much of the history a model call may be sent, in tokens, messages and turns.

use std::fmt;

/// The limits of one view; every limit set holds at once. Leading system messages and the
/// summary count toward the token and message limits (the summary as one message); turns are
/// user messages.
///
/// ```
/// use agentstate::context::Budget;
///
/// let budget = Budget::tokens(8_000).and_messages(200);
/// assert_eq!(budget.to_string(), "8000 tokens and 200 messages");
/// assert_eq!(Budget::turns(3).to_string(), "3 turns");
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Budget {
    /// At most this many tokens.
    pub max_tokens: Option<u64>,
    /// At most this many messages.
    pub max_messages: Option<usize>,
    /// At most this many turns (user messages) of the history.
    pub max_turns: Option<usize>,
}

impl Budget {
    /// At most `n` tokens.
    pub fn tokens(n: u64) -> Self {
        Budget::default().and_tokens(n)
    }

    /// At most `n` messages.
    pub fn messages(n: usize) -> Self {
        Budget::default().and_messages(n)
    }

    /// At most `n` turns.
    pub fn turns(n: usize) -> Self {
        Budget::default().and_turns(n)
    }

    /// This budget, also limited to `n` tokens.
    pub fn and_tokens(mut self, n: u64) -> Self {
        self.max_tokens = Some(n);
        self
    }

    /// This budget, also limited to `n` messages.
    pub fn and_messages(mut self, n: usize) -> Self {
        self.max_messages = Some(n);
        self
    }

    /// This budget, also limited to `n` turns.
    pub fn and_turns(mut self, n: usize) -> Self {
        self.max_turns = Some(n);
        self
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts = [
            self.max_tokens.map(|n| format!("{n} tokens")),
            self.max_messages.map(|n| format!("{n} messages")),
            self.max_turns.map(|n| format!("{n} turns")),
        ];
        let parts: Vec<String> = parts.into_iter().flatten().collect();
        if parts.is_empty() {
            f.write_str("no limit")
        } else {
            f.write_str(&parts.join(" and "))
        }
    }
}
