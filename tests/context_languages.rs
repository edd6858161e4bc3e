//! The token estimate against OpenAI's `o200k_base` (feature `tokenizer`) on natural text of
//! the ten most spoken languages, English prose, code and JSON (`tests/data/languages`,
//! [`context_support::LANGUAGES`]): within
//! 15% of the real count on each, and never under it by more than 5% (an estimate under the
//! real count lets a view overflow the model's window). Run with `cargo test --features
//! tokenizer --test context_languages -- --nocapture` to see the table that `benches/README.md`
//! shows.
#![cfg(feature = "tokenizer")]

use agentstate::context::Bpe;
use agentstate::context::{CharsOver4, Estimate, TokenCounter};
use context_support::LANGUAGES;

mod context_support;

/// The signed error of `estimate` against `real`, in percent.
fn error(estimate: u32, real: u32) -> f64 {
    (f64::from(estimate) - f64::from(real)) / f64::from(real) * 100.0
}

#[test]
fn estimate_within_15_percent_and_never_5_percent_under() {
    let real = Bpe::o200k_base();
    let estimate = Estimate::default();
    println!("| text | characters | `o200k_base` | `Estimate` | error | characters / 4 | error |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut failures = Vec::new();
    for (name, text) in LANGUAGES {
        let exact = real.count(text);
        let ours = estimate.count(text);
        let chars = CharsOver4.count(text);
        let e = error(ours, exact);
        println!(
            "| {name} | {} | {exact} | {ours} | {e:+.1}% | {chars} | {:+.1}% |",
            text.chars().count(),
            error(chars, exact)
        );
        if !(-5.0..=15.0).contains(&e) {
            failures.push(format!("{name}: {e:+.1}%"));
        }
    }
    assert!(failures.is_empty(), "outside -5%..+15%: {failures:?}");
}
