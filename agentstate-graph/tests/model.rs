//! `Context::complete`: a node's model call, streamed into the run's events when the run is
//! streamed (text and tool-call deltas with the final message's id), completed otherwise.

use agentstate::message::{ContentBlock, Message, Role, ToolCall};
use agentstate::model::{ChatModel, ModelError, ModelEvent, ModelStream, ScriptedModel};
use agentstate::providers::stream::Delta;
use agentstate::providers::{Conversation, ModelRequest};
use agentstate::AgentState;
use agentstate_graph::{node_names, Context, Emitted, Event, Graph, END};
use futures_util::StreamExt;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
struct Chat {
    #[reducer(add_messages)]
    messages: Vec<Message>,
}

node_names! {
    enum Step { Model = "model" }
}

fn graph(model: Arc<dyn ChatModel>) -> Graph<Chat, Step> {
    let request = Arc::new(ModelRequest::builder("any").build().expect("a request"));
    Graph::builder()
        .node(Step::Model, move |state: Arc<Chat>, cx: Context| {
            let (model, request) = (Arc::clone(&model), Arc::clone(&request));
            async move {
                let answer = cx.complete(&model, &request, &state.messages).await?;
                Ok::<_, ModelError>(ChatUpdate::default().messages(vec![answer]))
            }
        })
        .entry(Step::Model)
        .edge(Step::Model, END)
        .build()
        .expect("a graph")
}

fn start() -> Chat {
    Chat {
        messages: vec![Message::text_message("Weather in Paris?", Role::User).with_id("msg-user")],
    }
}

fn emitted(events: &[Event<Chat, Step>]) -> Vec<Emitted> {
    events
        .iter()
        .filter_map(|event| match event {
            Event::Emitted { emitted, .. } => Some((**emitted).clone()),
            _ => None,
        })
        .collect()
}

fn finished(events: &[Event<Chat, Step>]) -> Chat {
    match events.last() {
        Some(Event::RunFinished { state }) => (**state).clone(),
        other => panic!("the run did not finish: {other:?}"),
    }
}

#[tokio::test]
async fn a_streamed_run_emits_every_delta_with_the_answer_s_id() {
    let answer = Message::new(
        Role::Assistant,
        vec![
            ContentBlock::reasoning("Think."),
            ContentBlock::text("Let me check."),
        ],
    )
    .with_tool_calls(vec![ToolCall::new(
        "call_1",
        "get_weather",
        json!({"city": "Paris"}),
    )]);
    let model = ScriptedModel::new([answer.clone()]).chunk_size(4);
    let events: Vec<_> = graph(Arc::new(model.clone()))
        .stream(start())
        .collect()
        .await;
    let state = finished(&events);
    let message = state.messages.last().expect("the answer");
    assert_eq!(message.message_id, answer.message_id);
    let id = message.message_id.to_string();

    let emitted = emitted(&events);
    let mut text = String::new();
    let mut arguments = String::new();
    for event in &emitted {
        match event {
            Emitted::TextDelta { message_id, delta } => {
                assert_eq!(
                    *message_id, id,
                    "a text delta carries the final message's id"
                );
                text.push_str(delta);
            }
            Emitted::ToolCallDelta {
                message_id,
                tool_call_id,
                name,
                delta,
            } => {
                assert_eq!(
                    *message_id, id,
                    "a tool-call delta carries the final message's id"
                );
                assert_eq!(
                    (tool_call_id.as_str(), name.as_str()),
                    ("call_1", "get_weather")
                );
                arguments.push_str(delta);
            }
            other => panic!("unexpected emission {other:?}"),
        }
    }
    assert_eq!(text, "Let me check.");
    assert_eq!(arguments, message.tool_calls()[0].function.arguments);
    assert!(emitted.len() > 4, "the answer came in pieces");
    let sent = &model.requests()[0].messages;
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (sent[0].message_id.to_string(), sent[0].text()),
        ("msg-user".to_owned(), "Weather in Paris?".to_owned()),
        "the node sent the state's messages"
    );
}

/// A model that counts which of its methods is called.
#[derive(Default)]
struct Counting {
    streamed: AtomicUsize,
    completed: AtomicUsize,
}

impl ChatModel for Counting {
    fn stream(&self, _: &ModelRequest, _: Conversation<'_>) -> ModelStream {
        self.streamed.fetch_add(1, Ordering::SeqCst);
        let answer = Message::text_message("streamed", Role::Assistant);
        let delta = Delta::Text {
            message_id: answer.message_id.to_string(),
            delta: "streamed".into(),
        };
        Box::pin(futures_util::stream::iter([
            Ok(ModelEvent::Delta(delta)),
            Ok(ModelEvent::Done(answer)),
        ]))
    }

    fn complete(
        &self,
        _: &ModelRequest,
        _: Conversation<'_>,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Message, ModelError>> + Send + 'static>,
    > {
        self.completed.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(Message::text_message("completed", Role::Assistant)) })
    }
}

#[tokio::test]
async fn an_invoked_run_completes_and_a_streamed_one_streams() {
    let model = Arc::new(Counting::default());
    let state = graph(model.clone()).invoke(start()).await.expect("the run");
    assert_eq!(
        state.messages.last().map(Message::text).as_deref(),
        Some("completed")
    );
    assert_eq!(
        (
            model.streamed.load(Ordering::SeqCst),
            model.completed.load(Ordering::SeqCst)
        ),
        (0, 1)
    );

    let events: Vec<_> = graph(model.clone()).stream(start()).collect().await;
    assert_eq!(
        finished(&events)
            .messages
            .last()
            .map(Message::text)
            .as_deref(),
        Some("streamed")
    );
    assert_eq!(
        (
            model.streamed.load(Ordering::SeqCst),
            model.completed.load(Ordering::SeqCst)
        ),
        (1, 1)
    );
}

#[tokio::test]
async fn a_model_error_fails_the_node_with_its_sentence() {
    let model = ScriptedModel::new([]);
    let events: Vec<_> = graph(Arc::new(model)).stream(start()).collect().await;
    match events.last() {
        Some(Event::RunFailed { error }) => assert!(
            error.to_string().contains(
                "the scripted model has no answer left: it was given 0 and asked for call 1"
            ),
            "{error}"
        ),
        other => panic!("the run did not fail: {other:?}"),
    }
}
