//! The context window: what of a long history each model call is sent.
//!
//! A [`ContextView`] is a view, never a rewrite: it borrows the stored messages and names the
//! ones to send, within a [`Budget`] of tokens, messages or turns. Every view keeps tool calls
//! and their results together (no result without its call, no call without its results, no tool
//! sequence split, unanswered calls closed: [`pairing`]), keeps every system message, sends the
//! state's `context_summary` for
//! what was cut, and never exceeds its budget. A [`ContextIndex`] kept beside the history caches
//! each message's token count and pairing, so a view costs O(what it keeps).
//!
//! - [`tokens`]: the [`TokenCounter`] trait, the fast default [`Estimate`]; [`media`]: the
//!   tokens of images, audio, video and documents;
//! - `bpe` (feature `tokenizer`): OpenAI's `o200k_base` and `cl100k_base` counts;
//! - [`budget`], [`window`] (the cut), [`view`], [`index`], [`pairing`], [`error`];
//! - [`summary`]: summaries recorded as state updates, through the reducers and the journal.
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

#[cfg(feature = "tokenizer")]
pub mod bpe;
pub mod budget;
pub mod error;
pub mod index;
pub mod media;
pub mod pairing;
pub mod summary;
pub mod tokens;
pub mod view;
pub mod window;

pub use budget::Budget;
pub use error::ContextError;
pub use index::ContextIndex;
pub use media::{ImageRule, MediaTokens};
pub use pairing::Unanswered;
pub use summary::{SummaryPolicy, SummaryRequest, Threshold};
pub use tokens::{CharsOver4, Estimate, TokenCounter, MESSAGE_OVERHEAD};
pub use view::ContextView;
pub use window::{ContextWindow, Cut, SummaryRef};
