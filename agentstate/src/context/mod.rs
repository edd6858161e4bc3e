//! The context window: what of a long history each model call is sent.
//!
//! A [`ContextView`] is a view, never a rewrite: it borrows the stored messages and names the
//! ones to send, within a [`Budget`] of tokens, messages or turns. Every view keeps tool calls
//! and their results together (no result without its call, no call without its results, no tool
//! sequence split, unanswered calls closed: [`Unanswered`]), keeps every system message, sends the
//! state's `context_summary` for
//! what was cut, and never exceeds its budget. A [`ContextIndex`] kept beside the history caches
//! each message's token count and pairing, so a view costs O(what it keeps).
//!
//! - counting: the [`TokenCounter`] trait, the fast default [`Estimate`], [`CharsOver4`]
//!   (AgentFlow's count), `Bpe` (feature `tokenizer`: OpenAI's `o200k_base` and `cl100k_base`
//!   counts); [`MediaTokens`]: the tokens of images, audio, video and documents;
//! - [`Budget`], [`ContextWindow`] (the budget and the [`Cut`]), [`ContextView`] (what is sent),
//!   [`ContextIndex`], [`Unanswered`] (tool calls without results), [`ContextError`];
//! - [`SummaryRequest`] and [`SummaryPolicy`]: summaries recorded as state updates, through the
//!   reducers and the journal.
//!
//! ```
//! use agentstate::context::{ContextIndex, ContextWindow};
//! use agentstate::message::{Message, Role};
//!
//! let mut history = vec![Message::text_message("Be brief.", Role::System)];
//! for i in 0..100 {
//!     history.push(Message::text_message(format!("question {i}"), Role::User));
//!     history.push(Message::text_message(format!("answer {i}"), Role::Assistant));
//! }
//! let mut index = ContextIndex::default();
//! let view = index.view(&history, &ContextWindow::turns(3))?;
//! assert_eq!(view.system().len(), 1);
//! assert_eq!(view.history().next().unwrap().text(), "question 97");
//! assert_eq!(view.len(), 7);
//! # Ok::<(), agentstate::context::ContextError>(())
//! ```
//!
//! ## What a view guarantees
//!
//! - **Budgets** ([`Budget`]): tokens, messages, turns (user messages), or any combination. The
//!   leading system messages are always sent and counted, and so is the summary (as one
//!   message). When those alone exceed the budget the view is
//!   [`ContextError::OverBudget`], one sentence saying what did not fit; a budget that holds them
//!   but nothing else gives a view without history. Never a broken view.
//! - **Pairing**: no tool result without the assistant message that called it, no assistant
//!   message with tool calls without every result of theirs that the history holds, no tool
//!   sequence split. A tool message answers the latest earlier call with its `call_id` (in
//!   `tools_calls` or a `tool_call` block); one without a result block answers no call but is
//!   sent in the run of tool messages it is in, after the results (and stubs) of that run's
//!   calls. Tool messages that answer nothing are never sent; an assistant
//!   message whose calls have no results yet may be sent alone.
//! - **Cut policy** ([`Cut`]): `Tight` keeps the most; `Turns` starts at a user message;
//!   `Chunked { parts }` (the default, 4) starts at a user message on a grid of `budget / parts`
//!   tokens, so the first kept message moves once per chunk of growth and consecutive calls
//!   share their prompt prefix, which providers cache.
//! - **Summaries**: the state's `context_summary` is sent for what was cut. A summary recorded
//!   with [`SummaryRequest::record`] also sets `AgentState::context_summary_through` (the id of
//!   the last message it covers; a field agentstate adds to AgentFlow's state, left out of the
//!   JSON while `None`), so views never send those messages again. The new summary replaces the
//!   previous one (the summarizer is handed the previous one), so it stays bounded; it is an
//!   ordinary update, so it goes through the reducers and the journal, and
//!   [`SummaryRequest::undo`] reverts it. [`SummaryRequest::record_for`] gives the same update as
//!   the update type of a state that extends `AgentState`.
//!
//! ## Cost and token counts
//!
//! [`ContextIndex`] keeps each message's token count, its tool-call link and running token
//! sums; [`ContextIndex::sync`] indexes only appended messages (and re-indexes a history that was
//! replaced or shortened, or from a message edited in place, which it notices by a fingerprint
//! of each message). A view walks back from the newest message over what it keeps:
//! O(kept), not O(history).
//!
//! [`Estimate`] is a one-pass byte classifier fitted to OpenAI's tokenizers, erring high where
//! it cannot be exact (about 4% over on conversations, never more than 5% under on the
//! scripts and data it was checked on; characters / 4, AgentFlow's count, is 9% under). The feature
//! `tokenizer` adds `Bpe` (`o200k_base`, `cl100k_base`), exact, with the vocabularies
//! compiled in (nothing is downloaded). **Calibration** (on by default,
//! [`ContextWindow::calibrated`]): the last assistant message's `usages.prompt_tokens` is the
//! exact size of what was sent for it; the index remembers its estimate of that view and scales
//! the estimate by their ratio. The measurements are in `benches/README.md`.
//!
//! `cargo run --example context_window` prints what a model is sent from a 215-message history
//! with parallel tool calls, before and after a summary, and under a six-message budget.

#[cfg(feature = "tokenizer")]
mod bpe;
mod budget;
mod error;
mod index;
mod media;
mod pairing;
mod summary;
mod tokens;
mod view;
mod window;

#[cfg(feature = "tokenizer")]
pub use bpe::Bpe;
pub use budget::Budget;
pub use error::ContextError;
pub use index::ContextIndex;
pub use media::{image_size, ImageRule, MediaTokens};
pub use pairing::Unanswered;
pub use summary::{SummaryPolicy, SummaryRequest, Threshold};
pub use tokens::{CharsOver4, Estimate, TokenCounter, MESSAGE_OVERHEAD};
pub use view::ContextView;
pub use window::{ContextWindow, Cut, SummaryRef};
