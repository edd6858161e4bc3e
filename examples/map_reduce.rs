//! Map-reduce with the graph runner: a fan-out runs a one-node subgraph per document (at most
//! three at once), collects each document's word count into an `append` field in document
//! order, and a reduce node totals them. Run with `cargo run --example map_reduce`.

use agentstate::AgentState;
use agentstate_graph::parallel::FanOut;
use agentstate_graph::{Context, Graph, END};
use serde::{Deserialize, Serialize};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

/// One document's job: its text in, its word count out.
#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Count {
    text: String,
    words: usize,
}

/// The batch: documents in, counts collected, a total.
#[derive(AgentState, Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Corpus {
    documents: Vec<String>,
    /// One count per document, in document order, whichever finished first.
    #[reducer(append)]
    counts: Vec<usize>,
    total: usize,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The map: a subgraph of one node, run once per document.
    let count = Graph::builder()
        .node("count", |doc: Arc<Count>, _: Context| async move {
            // Longer documents take longer: completion order differs from document order.
            tokio::time::sleep(Duration::from_millis(doc.text.len() as u64)).await;
            Ok::<_, Infallible>(CountUpdate::default().words(doc.text.split_whitespace().count()))
        })
        .entry("count")
        .edge("count", END)
        .build()?;
    let map = FanOut::new(
        count,
        |c: &Corpus| {
            c.documents
                .iter()
                .map(|text| Count {
                    text: text.clone(),
                    words: 0,
                })
                .collect()
        },
        |done: Vec<Count>| {
            CorpusUpdate::default().counts(done.into_iter().map(|c| c.words).collect::<Vec<_>>())
        },
    )
    .concurrency(Some(3));

    let graph = Graph::builder()
        .node("map", map)
        .node("reduce", |c: Arc<Corpus>, _: Context| async move {
            Ok::<_, Infallible>(CorpusUpdate::default().total(c.counts.iter().sum::<usize>()))
        })
        .entry("map")
        .edge("map", "reduce")
        .edge("reduce", END)
        .build()?;

    let corpus = Corpus {
        documents: vec![
            "the quick brown fox jumps over the lazy dog".into(),
            "hello world".into(),
            "a graph runner merges parallel results through the reducers".into(),
            "one".into(),
        ],
        ..Corpus::default()
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    let done = runtime.block_on(graph.invoke(corpus))?;
    println!("counts per document: {:?}", done.counts);
    println!("total words: {}", done.total);
    assert_eq!(done.counts, [9, 2, 9, 1]);
    assert_eq!(done.total, 21);
    Ok(())
}
