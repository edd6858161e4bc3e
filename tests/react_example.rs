//! The `react` example, run in this process (its module included), once per decision a person
//! may take, each on a database of its own.

#[allow(dead_code)] // its `main`
#[path = "../examples/react.rs"]
mod example;

fn run(decision: &str) -> (agentstate::state::AgentState, String) {
    let dir = std::env::temp_dir().join(format!(
        "agentstate-react-{}-{decision}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("react.db");
    let mut out = Vec::new();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let state = runtime
        .block_on(example::run(db.to_str().unwrap(), decision, &mut out))
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (state, String::from_utf8(out).unwrap())
}

#[test]
fn approved_the_refund_runs_once_and_the_agent_answers() {
    let (state, out) = run("approve");
    assert!(
        out.starts_with(
            "Waiting for a person to approve refund({\"cents\":4999,\"order\":\"1042\"})\nThe person answers: approve\n"
        ),
        "{out}"
    );
    let lines: Vec<&str> = out.lines().skip(2).collect();
    assert_eq!(
        lines[0],
        "     user: Refund my order 1042, and what's the weather in Lisbon?"
    );
    assert_eq!(lines[1], "assistant: Let me check. -> get_weather({\"city\": \"Lisbon\"}), refund({\"cents\": 4999, \"order\": \"1042\"})");
    assert_eq!(lines[2], "     tool: Lisbon: sunny, 24 °C");
    assert!(
        lines[3].starts_with("     tool: refunded 4999 cents for order 1042 (R-"),
        "{out}"
    );
    assert_eq!(
        lines[4],
        "assistant: Done: see the refund's status above. Enjoy Lisbon's sun!"
    );
    assert_eq!(state.context.len(), 5);
}

#[test]
fn rejected_the_refund_is_not_paid_and_the_model_reads_why() {
    let (_, out) = run("reject");
    assert!(
        out.contains("\n     tool: Refunds need a manager today.\n"),
        "{out}"
    );
    assert!(!out.contains("refunded"), "{out}");
}

#[test]
fn edited_the_refund_runs_with_the_persons_amount() {
    let (_, out) = run("edit");
    assert!(
        out.contains("\n     tool: refunded 2000 cents for order 1042 (R-"),
        "{out}"
    );
}
