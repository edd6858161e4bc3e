//! Durable runs: AgentFlow's `ExecutionState` kept up to date, and time travel (checkpoints,
//! the state at a step, a fork that resumes from an earlier step, an update as a node).

use agentstate::message::{Message, Role};
use agentstate::state::{AgentState, AgentStateUpdate, ExecutionStatus};
use agentstate_graph::durable::{Answers, Outcome, RunStatus};
use agentstate_graph::{BoxError, Context, Graph, END};
use agentstate_store::SqliteStore;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(future)
}

fn say(text: &'static str) -> impl agentstate_graph::Node<AgentState> {
    move |_: Arc<AgentState>, _: Context| async move {
        Ok::<_, BoxError>(Message::text_message(text, Role::Assistant))
    }
}

/// plan -> approve (asks) -> act -> END
fn graph(acted: Arc<AtomicUsize>) -> Graph<AgentState> {
    Graph::builder()
        .node("plan", say("plan"))
        .node("approve", |_: Arc<AgentState>, cx: Context| async move {
            let answer = cx.interrupt(serde_json::json!({"action": "refund"}))?;
            let text = if answer == true {
                "approved"
            } else {
                "rejected"
            };
            Ok::<_, BoxError>(Message::text_message(text, Role::User))
        })
        .node("act", move |_: Arc<AgentState>, _: Context| {
            acted.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, BoxError>(Message::text_message("done", Role::Assistant)) }
        })
        .entry("plan")
        .edge("plan", "approve")
        .edge("approve", "act")
        .edge("act", END)
        .build()
        .expect("the graph builds")
}

fn texts(state: &AgentState) -> Vec<String> {
    state.context.iter().map(|m| m.text()).collect()
}

#[test]
fn the_execution_state_follows_the_run_as_agentflows_does() {
    block_on(async {
        let store = SqliteStore::open_in_memory().unwrap();
        let durable = graph(Arc::default()).durable(&store);
        let outcome = durable.start("t", AgentState::default()).await.unwrap();
        let Outcome::Suspended { interrupts, .. } = &outcome else {
            panic!("suspended: {outcome:?}")
        };
        let meta = &store
            .load::<AgentState>("t")
            .await
            .unwrap()
            .state
            .execution_meta;
        assert_eq!(meta.status, ExecutionStatus::InterruptedBefore);
        assert_eq!(meta.interrupted_node.as_deref(), Some("approve"));
        assert_eq!(meta.thread_id.as_deref(), Some("t"));
        assert_eq!((meta.current_node.as_str(), meta.step), ("approve", 1));
        assert!(meta
            .interrupt_reason
            .as_deref()
            .unwrap()
            .contains(&interrupts[0].id));

        let answers = Answers::new().answer(&interrupts[0].id, true);
        let Outcome::Finished { state, .. } = durable.resume_with("t", answers).await.unwrap()
        else {
            panic!("finished")
        };
        assert_eq!(texts(&state), ["plan", "approved", "done"]);
        let meta = &state.execution_meta;
        assert_eq!(meta.status, ExecutionStatus::Completed);
        assert_eq!((meta.current_node.as_str(), meta.step), ("act", 3));
        assert_eq!(meta.interrupted_node, None);
        // What the run returned is what the thread holds.
        assert_eq!(store.load::<AgentState>("t").await.unwrap().state, *state);
    });
}

#[test]
fn checkpoints_state_at_and_a_fork_that_resumes_from_an_earlier_step() {
    block_on(async {
        let store = SqliteStore::open_in_memory().unwrap();
        let acted = Arc::new(AtomicUsize::new(0));
        let durable = graph(Arc::clone(&acted)).durable(&store);
        let Outcome::Suspended { interrupts, .. } =
            durable.start("t", AgentState::default()).await.unwrap()
        else {
            panic!("suspended")
        };
        let answers = Answers::new().answer(&interrupts[0].id, false);
        durable.resume_with("t", answers).await.unwrap();
        assert_eq!(acted.load(Ordering::SeqCst), 1);

        let checkpoints = durable.checkpoints("t").await.unwrap();
        let steps: Vec<(u64, Vec<String>, Vec<String>)> = checkpoints
            .iter()
            .map(|c| (c.step, c.nodes.clone(), c.next.clone()))
            .collect();
        assert_eq!(
            steps,
            [
                (0, vec![], vec!["plan".to_owned()]),
                (1, vec!["plan".to_owned()], vec!["approve".to_owned()]),
                (2, vec!["approve".to_owned()], vec!["act".to_owned()]),
                (3, vec!["act".to_owned()], vec![]),
            ]
        );
        let after_plan = durable.state_at("t", checkpoints[1].version).await.unwrap();
        assert_eq!(texts(&after_plan), ["plan"]);

        // A fork after `plan` stands before `approve`: resumed, it asks again; the original
        // thread keeps its history.
        let status = durable
            .fork_at("t", checkpoints[1].version, "t2")
            .await
            .unwrap();
        assert_eq!(
            status,
            RunStatus::Running {
                step: 1,
                next: vec!["approve".to_owned()]
            }
        );
        let Outcome::Suspended { interrupts, .. } = durable.resume("t2").await.unwrap() else {
            panic!("the fork asks again")
        };
        let answers = Answers::new().answer(&interrupts[0].id, true);
        let Outcome::Finished { state, .. } = durable.resume_with("t2", answers).await.unwrap()
        else {
            panic!("finished")
        };
        assert_eq!(texts(&state), ["plan", "approved", "done"]);
        let original = store.load::<AgentState>("t").await.unwrap().state;
        assert_eq!(texts(&original), ["plan", "rejected", "done"]);
        assert_eq!(acted.load(Ordering::SeqCst), 2);
    });
}

#[test]
fn an_update_as_a_node_replaces_a_pending_question_and_continues_from_its_edge() {
    block_on(async {
        let store = SqliteStore::open_in_memory().unwrap();
        let durable = graph(Arc::default()).durable(&store);
        durable.start("t", AgentState::default()).await.unwrap();
        // Instead of answering, a person writes the approval themselves, as `approve`.
        let status = durable
            .update_as(
                "t",
                "approve",
                Message::text_message("approved by hand", Role::User),
            )
            .await
            .unwrap();
        assert_eq!(
            status,
            RunStatus::Running {
                step: 2,
                next: vec!["act".to_owned()]
            }
        );
        let Outcome::Finished { state, .. } = durable.resume("t").await.unwrap() else {
            panic!("finished")
        };
        assert_eq!(texts(&state), ["plan", "approved by hand", "done"]);
        // A node the graph does not have is refused.
        let err = durable
            .update_as("t", "nope", AgentStateUpdate::default())
            .await
            .unwrap_err();
        assert_eq!(err.category(), "run_state_invalid");
    });
}

#[derive(
    agentstate::AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize,
)]
struct Item {
    n: u64,
    #[reducer(append)]
    log: Vec<String>,
}

#[derive(
    agentstate::AgentState, Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize,
)]
struct Batch {
    items: Vec<u64>,
    #[reducer(append)]
    done: Vec<String>,
}

#[test]
fn questions_and_effects_inside_subgraphs_and_fan_out_instances_resume_in_place() {
    use agentstate_graph::parallel::FanOut;
    use agentstate_graph::subgraph::Subgraph;
    let paid = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&paid);
    // The child: pays (an effect), then, for item 1 only, asks before it logs.
    let child = Graph::builder()
        .node("pay", move |s: Arc<Item>, cx: Context| {
            let counter = Arc::clone(&counter);
            async move {
                let receipt: String = cx
                    .effect("pay", |key| async move {
                        counter.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, std::io::Error>(format!("paid {} ({key})", s.n))
                    })
                    .await?;
                Ok::<_, BoxError>(ItemUpdate::default().log(vec![receipt]))
            }
        })
        .node("confirm", |s: Arc<Item>, cx: Context| async move {
            if s.n == 1 {
                let answer = cx.interrupt(serde_json::json!({"item": s.n}))?;
                return Ok::<_, BoxError>(
                    ItemUpdate::default().log(vec![format!("confirmed: {answer}")]),
                );
            }
            Ok(ItemUpdate::default().log(vec!["no question".to_owned()]))
        })
        .entry("pay")
        .edge("pay", "confirm")
        .edge("confirm", END)
        .build()
        .unwrap();
    let fan_out = FanOut::new(
        child.clone(),
        |b: &Batch| b.items.iter().map(|&n| Item { n, log: vec![] }).collect(),
        |done: Vec<Item>| {
            BatchUpdate::default().done(
                done.into_iter()
                    .map(|i| i.log.join(" / "))
                    .collect::<Vec<_>>(),
            )
        },
    );
    let parent = Graph::builder()
        .node("each", fan_out)
        .node(
            "one",
            Subgraph::new(
                child,
                |_: &Batch| Item { n: 1, log: vec![] },
                |i: Item| BatchUpdate::default().done(vec![format!("sub: {}", i.log.join(" / "))]),
            ),
        )
        .entry("each")
        .edge("each", "one")
        .edge("one", END)
        .build()
        .unwrap();
    block_on(async {
        let store = SqliteStore::open_in_memory().unwrap();
        let durable = parent.durable(&store);
        let start = Batch {
            items: vec![0, 1, 2],
            done: vec![],
        };
        // The fan-out's instance 1 asks; the run suspends.
        let Outcome::Suspended { interrupts, .. } = durable.start("t", start).await.unwrap() else {
            panic!("suspended in the fan-out")
        };
        assert_eq!(interrupts.len(), 1);
        assert_eq!(interrupts[0].payload["item"], 1);
        assert!(
            interrupts[0].id.starts_with("confirm:"),
            "{}",
            interrupts[0].id
        );
        let paid_before = paid.load(Ordering::SeqCst);
        assert!(paid_before >= 2, "instance 1 paid before asking");
        // Answered: the instances run again, but no payment is made twice.
        let answers = Answers::new().answer(&interrupts[0].id, "yes");
        let Outcome::Suspended {
            interrupts: second, ..
        } = durable.resume_with("t", answers).await.unwrap()
        else {
            panic!("then suspended in the subgraph")
        };
        assert_ne!(
            second[0].id, interrupts[0].id,
            "the subgraph's question is another one"
        );
        assert_eq!(
            paid.load(Ordering::SeqCst),
            4,
            "three instances and the subgraph paid once each"
        );
        let answers = Answers::new().answer(&second[0].id, "ok");
        let Outcome::Finished { state, .. } = durable.resume_with("t", answers).await.unwrap()
        else {
            panic!("finished")
        };
        assert_eq!(paid.load(Ordering::SeqCst), 4);
        assert_eq!(state.done.len(), 4);
        assert!(
            state.done[1].ends_with("confirmed: \"yes\""),
            "{:?}",
            state.done
        );
        assert!(state.done[3].starts_with("sub: paid 1"), "{:?}", state.done);
        assert!(
            state.done[3].ends_with("confirmed: \"ok\""),
            "{:?}",
            state.done
        );
    });
}
