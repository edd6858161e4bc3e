//! The context window: the cost of one view of an 8k-token budget over histories of 1k, 10k
//! and 100k messages (a realistic conversation with parallel tool calls, from
//! `tests/context_support`), and the speed of the token counters.
//!
//! The index is synced before the timing, as it is in an agent that views the history before
//! every model call: the timed view checks that the history has not changed (O(1)), walks back
//! over what it keeps and returns the kept ranges. `append_and_view` also appends one message
//! per iteration, so that the timing includes indexing it (counting its tokens).
//!
//! `count_language` times `Estimate` on each sample of `tests/data/languages` (the ten most
//! spoken languages, code, JSON) per character. With `--features tokenizer` the BPE counters
//! are timed too, and the accuracy table of `benches/README.md` ("Context window token
//! estimate") is printed first: `Estimate` and characters / 4 against `o200k_base` per sample.
//!
//! Run with `cargo bench --bench context` (`--features tokenizer` adds the BPE counters); the
//! `benches/README.md`'s tables come from it.

#[path = "../tests/context_support/mod.rs"]
mod context_support;

use agentstate::context::{Budget, ContextIndex, ContextWindow, Cut, Estimate, TokenCounter};
use agentstate::message::{Message, Role, TokenUsages};
use divan::counter::{BytesCount, CharsCount};
use divan::Bencher;

fn main() {
    #[cfg(feature = "tokenizer")]
    accuracy_table();
    divan::main();
}

/// The accuracy table: each language sample's tokens under `o200k_base`, `Estimate` and
/// characters / 4, with their errors.
#[cfg(feature = "tokenizer")]
fn accuracy_table() {
    let real = agentstate::context::Bpe::o200k_base();
    let error = |n: u32, exact: u32| (f64::from(n) - f64::from(exact)) / f64::from(exact) * 100.0;
    println!("| text | characters | `o200k_base` | `Estimate` | error | characters / 4 | error |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (name, text) in context_support::LANGUAGES {
        let exact = real.count(text);
        let (ours, chars) = (
            Estimate::default().count(text),
            agentstate::context::CharsOver4.count(text),
        );
        println!(
            "| {name} | {} | {exact} | {ours} | {:+.1}% | {chars} | {:+.1}% |",
            text.chars().count(),
            error(ours, exact),
            error(chars, exact)
        );
    }
    println!();
}

/// The names of the language samples.
const LANGUAGES: [&str; 12] = {
    let mut names = [""; 12];
    let mut i = 0;
    while i < 12 {
        names[i] = context_support::LANGUAGES[i].0;
        i += 1;
    }
    names
};

/// `Estimate` on one language sample, per character.
#[divan::bench(args = LANGUAGES)]
fn count_language(bencher: Bencher, name: &str) {
    let text = context_support::LANGUAGES
        .iter()
        .find(|(n, _)| *n == name)
        .map_or("", |(_, text)| text);
    let estimate = Estimate::default();
    bencher
        .counter(CharsCount::of_str(text))
        .bench_local(|| estimate.count(divan::black_box(text)));
}

/// History lengths, in messages.
const SIZES: [usize; 3] = [1_000, 10_000, 100_000];

/// A history of `n` messages and an index synced with it.
fn setup(n: usize) -> (Vec<Message>, ContextIndex) {
    let history = context_support::messages(n);
    let mut index = ContextIndex::default();
    index.sync(&history);
    (history, index)
}

fn bench_view(bencher: Bencher, n: usize, window: ContextWindow) {
    let (history, mut index) = setup(n);
    bencher.bench_local(|| {
        let view = index.view(divan::black_box(&history), &window).unwrap();
        divan::black_box(view.cut())
    });
}

/// 8k tokens, chunked turns (the default).
#[divan::bench(args = SIZES)]
fn view_8k_tokens(bencher: Bencher, n: usize) {
    bench_view(bencher, n, ContextWindow::tokens(8_000));
}

/// 8k tokens, and what is sent made (`ContextView::messages`: the summary message, the
/// pairing of calls and results).
#[divan::bench(args = SIZES)]
fn view_8k_tokens_and_messages(bencher: Bencher, n: usize) {
    let (history, mut index) = setup(n);
    let window = ContextWindow::tokens(8_000);
    bencher.bench_local(|| {
        let view = index.view(divan::black_box(&history), &window).unwrap();
        divan::black_box(view.messages().len())
    });
}

/// 8k tokens, the tight cut.
#[divan::bench(args = SIZES)]
fn view_8k_tokens_tight(bencher: Bencher, n: usize) {
    bench_view(
        bencher,
        n,
        ContextWindow::tokens(8_000).with_cut(Cut::Tight),
    );
}

/// 128k tokens: a large model's window.
#[divan::bench(args = SIZES)]
fn view_128k_tokens(bencher: Bencher, n: usize) {
    bench_view(bencher, n, ContextWindow::tokens(128_000));
}

/// 8k tokens and at most 100 messages and 20 turns.
#[divan::bench(args = SIZES)]
fn view_8k_100_messages_20_turns(bencher: Bencher, n: usize) {
    let budget = Budget::tokens(8_000).and_messages(100).and_turns(20);
    bench_view(bencher, n, ContextWindow::new(budget));
}

/// 8k tokens, calibrated: the last message is an assistant answer whose usage the provider
/// reported, and the view sent for it was made by the same index.
#[divan::bench(args = SIZES)]
fn view_8k_tokens_calibrated(bencher: Bencher, n: usize) {
    let (mut history, mut index) = setup(n);
    let window = ContextWindow::tokens(8_000);
    let before = index.view(&history, &window).unwrap().tokens();
    history.push(
        Message::text_message("Done.", Role::Assistant)
            .with_id("answer")
            .with_usages(TokenUsages::new(3, before as i64 + 40)),
    );
    bencher.bench_local(|| {
        let view = index.view(divan::black_box(&history), &window).unwrap();
        divan::black_box(view.tokens())
    });
}

/// One message appended, indexed and viewed (8k tokens).
#[divan::bench(args = SIZES)]
fn append_and_view(bencher: Bencher, n: usize) {
    let (mut history, mut index) = setup(n);
    let window = ContextWindow::tokens(8_000);
    let template = history[history.len() - 4].clone();
    let mut next = 0u64;
    bencher.bench_local(|| {
        next += 1;
        history.push(template.clone().with_id(format!("new-{next}")));
        let view = index.view(&history, &window).unwrap();
        divan::black_box(view.cut())
    });
}

/// The conversation's texts, concatenated: about 1.3 MB of prose, code and JSON.
fn corpus() -> String {
    let mut text = String::new();
    for m in context_support::conversation(400) {
        text.push_str(&m.text());
        for call in m.tool_calls() {
            text.push_str(&call.function.arguments);
        }
        text.push('\n');
    }
    text
}

fn bench_count(bencher: Bencher, counter: &dyn TokenCounter) {
    let text = corpus();
    bencher
        .counter(BytesCount::of_str(&text))
        .bench_local(|| counter.count(divan::black_box(&text)));
}

/// Token counting throughput.
#[divan::bench_group]
mod count {
    use super::*;

    #[divan::bench]
    fn estimate(bencher: Bencher) {
        bench_count(bencher, &Estimate::default());
    }

    #[divan::bench]
    fn chars_over_4(bencher: Bencher) {
        bench_count(bencher, &agentstate::context::CharsOver4);
    }

    #[cfg(feature = "tokenizer")]
    #[divan::bench]
    fn bpe_o200k_base(bencher: Bencher) {
        bench_count(bencher, &agentstate::context::Bpe::o200k_base());
    }

    #[cfg(feature = "tokenizer")]
    #[divan::bench]
    fn bpe_cl100k_base(bencher: Bencher) {
        bench_count(bencher, &agentstate::context::Bpe::cl100k_base());
    }
}
