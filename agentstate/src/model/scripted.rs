//! [`ScriptedModel`]: a [`ChatModel`] that answers from a list, for tests and examples.

use super::{ChatModel, ModelError, ModelEvent, ModelStream};
use crate::message::{ContentBlock, Message, Role};
use crate::providers::stream::Delta;
use crate::providers::{Conversation, ModelRequest};
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

/// A [`ChatModel`] that answers from a script, in order, as LangChain's
/// `GenericFakeChatModel` does: each answer's text is streamed in chunks of
/// [`chunk_size`](ScriptedModel::chunk_size) characters (reasoning too), each tool call's
/// arguments as tool-call deltas, then the message itself. A call after the last answer is a
/// [`ModelError::ScriptExhausted`]; a scripted error is returned as it is. Every request is
/// recorded ([`requests`](ScriptedModel::requests)) for assertions.
///
/// Clones share the script and the record (an `Arc` inside), so a test keeps one clone and
/// hands the other to the code under test.
///
/// ```
/// use agentstate::message::{Message, Role, ToolCall};
/// use agentstate::model::{ChatModel, ModelEvent, ScriptedModel};
/// use agentstate::providers::{ModelRequest, stream::Delta};
/// use futures_util::StreamExt;
/// use serde_json::json;
///
/// let model = ScriptedModel::new([
///     Message::text_message("", Role::Assistant)
///         .with_tool_calls(vec![ToolCall::new("call_1", "get_weather", json!({"city": "Paris"}))]),
///     Message::text_message("Sunny in Paris.", Role::Assistant),
/// ])
/// .chunk_size(5);
/// let request = ModelRequest::builder("any-model").build()?;
/// let question = [Message::text_message("Weather in Paris?", Role::User)];
///
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// // The first answer: a tool call, its arguments streamed in pieces of 5 characters.
/// let answer = model.complete(&request, (&question).into()).await?;
/// assert_eq!(answer.tool_calls()[0].function.arguments, r#"{"city": "Paris"}"#);
///
/// // The second, streamed: text deltas, then the message.
/// let mut stream = model.stream(&request, (&question).into());
/// let mut text = String::new();
/// while let Some(event) = stream.next().await {
///     match event? {
///         ModelEvent::Delta(Delta::Text { delta, .. }) => text.push_str(&delta),
///         ModelEvent::Done(message) => assert_eq!(message.text(), text),
///         _ => {}
///     }
/// }
/// assert_eq!(text, "Sunny in Paris.");
///
/// // A third call finds no answer.
/// let error = model.complete(&request, (&question).into()).await.unwrap_err();
/// assert_eq!(error.to_string(), "the scripted model has no answer left: it was given 2 and \
///     asked for call 3; add answers with `ScriptedModel::push`");
/// assert_eq!(model.requests().len(), 3);
/// assert_eq!(model.requests()[0].messages[0].text(), "Weather in Paris?");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct ScriptedModel {
    inner: Arc<Inner>,
    chunk_size: usize,
}

struct Inner {
    state: Mutex<Script>,
}

#[derive(Default)]
struct Script {
    answers: VecDeque<Result<Message, ModelError>>,
    given: usize,
    requests: Vec<RecordedRequest>,
}

/// A request a [`ScriptedModel`] got: the parameters and the conversation, owned.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The request's parameters.
    pub request: ModelRequest,
    /// The conversation's messages.
    pub messages: Vec<Message>,
    /// The conversation's context summary, if any.
    pub summary: Option<String>,
}

/// The chunk size a [`ScriptedModel`] starts with, in characters.
pub const DEFAULT_CHUNK_SIZE: usize = 8;

impl ScriptedModel {
    /// A model that gives these answers, in order, one per call.
    pub fn new(answers: impl IntoIterator<Item = Message>) -> Self {
        let model = ScriptedModel {
            inner: Arc::new(Inner {
                state: Mutex::new(Script::default()),
            }),
            chunk_size: DEFAULT_CHUNK_SIZE,
        };
        for answer in answers {
            model.push(answer);
        }
        model
    }

    /// A model whose answers are assistant messages with these texts.
    ///
    /// ```
    /// use agentstate::model::{ChatModel, ScriptedModel};
    /// use agentstate::providers::{Conversation, ModelRequest};
    ///
    /// let model = ScriptedModel::from_texts(["Hello!"]);
    /// let request = ModelRequest::builder("m").build()?;
    /// let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    /// let answer = runtime.block_on(model.complete(&request, Conversation::new(&[])))?;
    /// assert_eq!(answer.text(), "Hello!");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_texts<T: Into<String>>(texts: impl IntoIterator<Item = T>) -> Self {
        ScriptedModel::new(
            texts
                .into_iter()
                .map(|text| Message::text_message(text, Role::Assistant)),
        )
    }

    /// Streams text, reasoning and tool-call arguments in chunks of `size` characters (at least
    /// 1; [`DEFAULT_CHUNK_SIZE`] by default). A clone made before keeps its own size.
    pub fn chunk_size(mut self, size: usize) -> Self {
        self.chunk_size = size.max(1);
        self
    }

    /// Adds an answer after the others (shared with every clone).
    pub fn push(&self, answer: Message) {
        let mut script = self.script();
        script.answers.push_back(Ok(answer));
        script.given += 1;
    }

    /// Adds an error as the next answer after the others: that call fails with it (to test
    /// how a caller handles a rate limit, a cut stream...).
    pub fn push_error(&self, error: ModelError) {
        let mut script = self.script();
        script.answers.push_back(Err(error));
        script.given += 1;
    }

    /// The requests received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.script().requests.clone()
    }

    /// How many answers are left.
    pub fn remaining(&self) -> usize {
        self.script().answers.len()
    }

    fn script(&self) -> MutexGuard<'_, Script> {
        // A panic while holding the lock cannot leave the script half-changed: recover it.
        self.inner
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The events of one answer: its deltas, then the message.
    fn events(&self, message: Message) -> VecDeque<Result<ModelEvent, ModelError>> {
        let id = message.message_id.to_string();
        let mut events = VecDeque::new();
        for block in &message.content {
            match block {
                ContentBlock::Text(text) => {
                    for piece in chunks(&text.text, self.chunk_size) {
                        events.push_back(Ok(ModelEvent::Delta(Delta::Text {
                            message_id: id.clone(),
                            delta: piece.to_owned(),
                        })));
                    }
                }
                ContentBlock::Reasoning(reasoning) => {
                    for piece in chunks(&reasoning.summary, self.chunk_size) {
                        events.push_back(Ok(ModelEvent::Delta(Delta::Reasoning {
                            message_id: id.clone(),
                            delta: piece.to_owned(),
                        })));
                    }
                }
                _ => {}
            }
        }
        for call in message.tool_calls() {
            let arguments = &call.function.arguments;
            let mut pieces = chunks(arguments, self.chunk_size).peekable();
            if pieces.peek().is_none() {
                // A call without arguments is still announced.
                events.push_back(Ok(ModelEvent::Delta(Delta::ToolCall {
                    message_id: id.clone(),
                    tool_call_id: call.id.clone(),
                    name: call.function.name.clone(),
                    delta: String::new(),
                })));
            }
            for piece in pieces {
                events.push_back(Ok(ModelEvent::Delta(Delta::ToolCall {
                    message_id: id.clone(),
                    tool_call_id: call.id.clone(),
                    name: call.function.name.clone(),
                    delta: piece.to_owned(),
                })));
            }
        }
        events.push_back(Ok(ModelEvent::Done(message)));
        events
    }
}

/// `text` in pieces of `size` characters (none for an empty text).
fn chunks(text: &str, size: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest
            .char_indices()
            .nth(size)
            .map_or(rest.len(), |(at, _)| at);
        let (piece, tail) = rest.split_at(end);
        rest = tail;
        Some(piece)
    })
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let script = self.script();
        f.debug_struct("ScriptedModel")
            .field("remaining", &script.answers.len())
            .field("requests", &script.requests.len())
            .field("chunk_size", &self.chunk_size)
            .finish()
    }
}

impl ChatModel for ScriptedModel {
    fn stream(&self, request: &ModelRequest, conversation: Conversation<'_>) -> ModelStream {
        let answer = {
            let mut script = self.script();
            script.requests.push(RecordedRequest {
                request: request.clone(),
                messages: conversation.messages.to_vec(),
                summary: conversation.summary.map(str::to_owned),
            });
            let call = script.requests.len();
            let given = script.given;
            script
                .answers
                .pop_front()
                .unwrap_or(Err(ModelError::ScriptExhausted {
                    answers: given,
                    call,
                }))
        };
        let events = match answer {
            Ok(message) => self.events(message),
            Err(error) => VecDeque::from([Err(error)]),
        };
        Box::pin(Events(events))
    }
}

/// A stream of events known in advance.
struct Events(VecDeque<Result<ModelEvent, ModelError>>);

impl futures_core::Stream for Events {
    type Item = Result<ModelEvent, ModelError>;

    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Poll::Ready(self.0.pop_front())
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.0.len(), Some(self.0.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_split_on_characters_not_bytes() {
        let pieces: Vec<&str> = chunks("héllo wörld", 4).collect();
        assert_eq!(pieces, ["héll", "o wö", "rld"]);
        assert_eq!(chunks("", 3).count(), 0);
    }
}
