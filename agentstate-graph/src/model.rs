//! [`Context::complete`]: a model call from a node, its deltas forwarded to the run's stream.

use crate::node::{Context, Emitted};
use agentstate::message::Message;
use agentstate::model::{ChatModel, ModelError, ModelEvent};
use agentstate::providers::stream::{Delta, StreamError};
use agentstate::providers::{Conversation, ModelRequest};
use futures_util::StreamExt;

impl Context {
    /// Calls `model` and returns its answer. When the run is streamed, the answer is streamed
    /// ([`ChatModel::stream`]) and each text and tool-call delta is emitted as it arrives, as
    /// [`Emitted::TextDelta`] and [`Emitted::ToolCallDelta`] with the id the returned message
    /// has (so the AG-UI adapter shows the answer as it is written); reasoning deltas are not
    /// emitted (the runner has no reasoning event). Otherwise it calls
    /// [`ChatModel::complete`], which a provider may answer without streaming.
    ///
    /// ```
    /// use agentstate::message::{Message, Role};
    /// use agentstate::model::ScriptedModel;
    /// use agentstate::providers::ModelRequest;
    /// use agentstate::{AgentState, State};
    /// use agentstate_graph::{node_names, Context, Emitted, Event, Graph, END};
    /// use futures_util::StreamExt;
    /// use std::sync::Arc;
    ///
    /// #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
    /// struct Chat {
    ///     #[reducer(add_messages)]
    ///     messages: Vec<Message>,
    /// }
    ///
    /// node_names! { enum Step { Model = "model" } }
    ///
    /// let model = ScriptedModel::from_texts(["Hello! How can I help?"]).chunk_size(7);
    /// let request = Arc::new(ModelRequest::builder("gpt-4.1-mini").build()?);
    /// let graph = Graph::builder()
    ///     .node(Step::Model, move |state: Arc<Chat>, cx: Context| {
    ///         let (model, request) = (model.clone(), Arc::clone(&request));
    ///         async move {
    ///             let answer = cx.complete(&model, &request, &state.messages).await?;
    ///             Ok::<_, agentstate::model::ModelError>(ChatUpdate::default().messages(vec![answer]))
    ///         }
    ///     })
    ///     .entry(Step::Model)
    ///     .edge(Step::Model, END)
    ///     .build()?;
    ///
    /// let start = Chat { messages: vec![Message::text_message("Hi!", Role::User)] };
    /// let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    /// let events: Vec<_> = runtime.block_on(graph.stream(start).collect());
    /// let pieces: Vec<&str> = events.iter().filter_map(|event| match event {
    ///     Event::Emitted { emitted, .. } => match &**emitted {
    ///         Emitted::TextDelta { delta, .. } => Some(delta.as_str()),
    ///         _ => None,
    ///     },
    ///     _ => None,
    /// }).collect();
    /// assert_eq!(pieces, ["Hello! ", "How can", " I help", "?"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn complete<'a, M>(
        &self,
        model: &M,
        request: &ModelRequest,
        conversation: impl Into<Conversation<'a>>,
    ) -> Result<Message, ModelError>
    where
        M: ChatModel + ?Sized,
    {
        if !self.is_streamed() {
            return model.complete(request, conversation.into()).await;
        }
        let mut stream = model.stream(request, conversation.into());
        let mut deltas = 0;
        while let Some(event) = stream.next().await {
            match event? {
                ModelEvent::Done(message) => return Ok(message),
                ModelEvent::Delta(delta) => {
                    deltas += 1;
                    match delta {
                        Delta::Text { message_id, delta } => {
                            self.emit(Emitted::TextDelta { message_id, delta })
                        }
                        Delta::ToolCall {
                            message_id,
                            tool_call_id,
                            name,
                            delta,
                        } => self.emit(Emitted::ToolCallDelta {
                            message_id,
                            tool_call_id,
                            name,
                            delta,
                        }),
                        // The runner has no reasoning event.
                        Delta::Reasoning { .. } => {}
                    }
                }
            }
        }
        Err(ModelError::Stream(StreamError::Incomplete {
            provider: "model",
            events: deltas,
            expected: "ModelEvent::Done",
        }))
    }
}
