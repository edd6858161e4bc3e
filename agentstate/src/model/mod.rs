//! Calling a model: the [`ChatModel`] trait a node calls, its [`ModelEvent`] stream and
//! [`ModelError`], and [`ScriptedModel`], a model that answers from a list (for tests and
//! examples).
//!
//! A [`ChatModel`] takes a [`ModelRequest`] (the model, tools, sampling...) and a
//! [`Conversation`], and either streams the answer ([`ChatModel::stream`]: text, reasoning
//! and tool-call [`Delta`]s as they arrive, then exactly one [`ModelEvent::Done`] with the
//! finished [`Message`], last) or gives the message alone ([`ChatModel::complete`]). Every
//! delta carries the id the final message has. The stream and the future own everything
//! they need (`'static`): the request is converted when the call is made, so the caller
//! keeps its messages. Dropping the stream or the future cancels the call.
//!
//! The HTTP clients of the four providers, with retries and timeouts, are behind the
//! `client` feature (`OpenAiChat`, `OpenAiResponses`, `Anthropic`, `Gemini`); this module
//! itself makes no HTTP call. In `agentstate-graph`, `Context::complete` calls a model and
//! forwards its deltas to the run's event stream.
//!
//! ```
//! use agentstate::message::{Message, Role};
//! use agentstate::model::{ChatModel, ModelEvent, ScriptedModel};
//! use agentstate::providers::stream::Delta;
//! use agentstate::providers::ModelRequest;
//! use futures_util::StreamExt;
//! use std::sync::Arc;
//!
//! // Any model, behind one type: a provider's client in production, a script in tests.
//! let model: Arc<dyn ChatModel> = Arc::new(ScriptedModel::from_texts(["Hello there!"]).chunk_size(6));
//! let request = ModelRequest::builder("gpt-4.1-mini").build()?;
//! let messages = vec![Message::text_message("Hi!", Role::User)];
//!
//! # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
//! let mut stream = model.stream(&request, (&messages).into());
//! let mut pieces = Vec::new();
//! while let Some(event) = stream.next().await {
//!     match event? {
//!         ModelEvent::Delta(Delta::Text { delta, .. }) => pieces.push(delta),
//!         ModelEvent::Delta(_) => {}
//!         ModelEvent::Done(message) => assert_eq!(message.text(), "Hello there!"),
//!     }
//! }
//! assert_eq!(pieces, ["Hello ", "there!"]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod error;
mod scripted;

pub use error::ModelError;
pub use scripted::{RecordedRequest, ScriptedModel, DEFAULT_CHUNK_SIZE};

use crate::message::Message;
use crate::providers::stream::{Delta, StreamError};
use crate::providers::{Conversation, ModelRequest};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// A model's streamed answer: [`ModelEvent::Delta`]s, then exactly one [`ModelEvent::Done`],
/// last; or an error, after which nothing follows.
pub type ModelStream =
    Pin<Box<dyn futures_core::Stream<Item = Result<ModelEvent, ModelError>> + Send + 'static>>;

/// What a model's stream yields.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// A piece of the answer (text, reasoning or a tool call's arguments), carrying the id
    /// the final message has.
    Delta(Delta),
    /// The finished message, with its usage: the stream's last event.
    Done(Message),
}

/// The future of [`ChatModel::complete`].
pub type ModelFuture = Pin<Box<dyn Future<Output = Result<Message, ModelError>> + Send + 'static>>;

/// A chat model: a provider's client (feature `client`), a [`ScriptedModel`], or your own.
///
/// Implement [`stream`](ChatModel::stream); [`complete`](ChatModel::complete) drains it by
/// default. `Arc<M>` and `Arc<dyn ChatModel>` are models too.
///
/// ```
/// use agentstate::message::{Message, Role};
/// use agentstate::model::{ChatModel, ModelError, ModelEvent, ModelStream};
/// use agentstate::providers::{Conversation, ModelRequest};
///
/// /// Answers every request with the last message's text, reversed.
/// struct Echo;
///
/// impl ChatModel for Echo {
///     fn stream(&self, _: &ModelRequest, conversation: Conversation<'_>) -> ModelStream {
///         let text: String = conversation.messages.last().map(|m| m.text()).unwrap_or_default();
///         let answer = Message::text_message(text.chars().rev().collect::<String>(), Role::Assistant);
///         Box::pin(futures_util::stream::iter([Ok::<_, ModelError>(ModelEvent::Done(answer))]))
///     }
/// }
///
/// let request = ModelRequest::builder("echo").build()?;
/// let messages = [Message::text_message("abc", Role::User)];
/// let runtime = tokio::runtime::Builder::new_current_thread().build()?;
/// let answer = runtime.block_on(Echo.complete(&request, (&messages).into()))?;
/// assert_eq!(answer.text(), "cba");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait ChatModel: Send + Sync + 'static {
    /// Streams the answer to `request` with `conversation`: deltas, then one
    /// [`ModelEvent::Done`]. A request the provider cannot take is an error of the stream's
    /// first item ([`ModelError::Request`]), not a panic.
    fn stream(&self, request: &ModelRequest, conversation: Conversation<'_>) -> ModelStream;

    /// The answer to `request` with `conversation`, as a message. By default, drains
    /// [`stream`](ChatModel::stream) and returns its [`ModelEvent::Done`] message; a stream
    /// that ends without one is a [`ModelError::Stream`].
    fn complete(
        &self,
        request: &ModelRequest,
        conversation: Conversation<'_>,
    ) -> Pin<Box<dyn Future<Output = Result<Message, ModelError>> + Send + 'static>> {
        Box::pin(Drain {
            stream: self.stream(request, conversation),
            events: 0,
        })
    }
}

impl<M: ChatModel + ?Sized> ChatModel for Arc<M> {
    fn stream(&self, request: &ModelRequest, conversation: Conversation<'_>) -> ModelStream {
        (**self).stream(request, conversation)
    }

    fn complete(
        &self,
        request: &ModelRequest,
        conversation: Conversation<'_>,
    ) -> Pin<Box<dyn Future<Output = Result<Message, ModelError>> + Send + 'static>> {
        (**self).complete(request, conversation)
    }
}

impl<M: ChatModel + ?Sized> ChatModel for Box<M> {
    fn stream(&self, request: &ModelRequest, conversation: Conversation<'_>) -> ModelStream {
        (**self).stream(request, conversation)
    }

    fn complete(
        &self,
        request: &ModelRequest,
        conversation: Conversation<'_>,
    ) -> Pin<Box<dyn Future<Output = Result<Message, ModelError>> + Send + 'static>> {
        (**self).complete(request, conversation)
    }
}

/// Drains a [`ModelStream`] into its final message.
struct Drain {
    stream: ModelStream,
    events: usize,
}

impl Future for Drain {
    type Output = Result<Message, ModelError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            match self.stream.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(ModelEvent::Done(message)))) => {
                    return Poll::Ready(Ok(message))
                }
                Poll::Ready(Some(Ok(ModelEvent::Delta(_)))) => self.events += 1,
                Poll::Ready(Some(Err(error))) => return Poll::Ready(Err(error)),
                Poll::Ready(None) => {
                    return Poll::Ready(Err(ModelError::Stream(StreamError::Incomplete {
                        provider: "model",
                        events: self.events,
                        expected: "ModelEvent::Done",
                    })))
                }
            }
        }
    }
}
