//! The token estimate against OpenAI's real tokenizer (feature `tokenizer`) on a realistic
//! conversation (tests/context_support): the error of each counter per kind of text, and of the
//! calibrated estimate of each model call's view, as `benches/README.md`'s accuracy table shows it. Run
//! with `cargo test --features tokenizer --test context_tokens -- --nocapture` to see the table.
#![cfg(feature = "tokenizer")]

mod context_support;

use agentstate::context::Bpe;
use agentstate::context::{CharsOver4, ContextIndex, ContextWindow, Estimate, TokenCounter};
use agentstate::message::{Message, Role, TokenUsages};
use context_support::{conversation, kind, Kind};

/// Σ estimate / Σ real over the messages of one kind.
fn ratio(history: &[Message], only: Kind, counter: &dyn TokenCounter, real: &Bpe) -> f64 {
    let (mut est, mut exact) = (0u64, 0u64);
    for m in history.iter().filter(|m| kind(m) == only) {
        est += u64::from(counter.count_message(m));
        exact += u64::from(real.count_message(m));
    }
    est as f64 / exact as f64
}

#[test]
fn estimate_per_kind_of_text() {
    let history = conversation(200);
    for real in [Bpe::o200k_base(), Bpe::cl100k_base()] {
        for only in [Kind::Prose, Kind::Code, Kind::Json] {
            let estimate = ratio(&history, only, &Estimate::default(), &real);
            let chars = ratio(&history, only, &CharsOver4, &real);
            println!(
                "{:<12} {only:?}: Estimate {:+.1}%, chars/4 {:+.1}%",
                real.name(),
                (estimate - 1.0) * 100.0,
                (chars - 1.0) * 100.0
            );
            assert!(
                (estimate - 1.0).abs() < 0.1,
                "Estimate within 10% on {only:?} against {}",
                real.name()
            );
            if only != Kind::Code {
                assert!(
                    (estimate - 1.0).abs() < (chars - 1.0).abs(),
                    "better than chars/4"
                );
            }
        }
    }
}

/// Errors of one counter over the model calls of a conversation, in percent.
#[derive(Debug, Default)]
struct Errors {
    abs: Vec<f64>,
    signed_sum: f64,
}

impl Errors {
    fn add(&mut self, estimate: u64, real: u64) {
        let e = (estimate as f64 - real as f64) / real as f64 * 100.0;
        self.abs.push(e.abs());
        self.signed_sum += e;
    }
    fn mean_abs(&self) -> f64 {
        self.abs.iter().sum::<f64>() / self.abs.len() as f64
    }
    fn p95(&self) -> f64 {
        let mut v = self.abs.clone();
        v.sort_by(f64::total_cmp);
        v[(v.len() * 95 / 100).min(v.len() - 1)]
    }
    fn bias(&self) -> f64 {
        self.signed_sum / self.abs.len() as f64
    }
}

/// Replays a conversation call by call: before each assistant message the view of an 8k-token
/// window is taken, its real size counted with the real tokenizer, and the assistant message
/// recorded with that size as its `usages.prompt_tokens`, as a provider reports it. The
/// calibrated estimate of each call is compared with its real size.
#[test]
fn calibrated_estimate_is_within_two_percent() {
    let conversation = conversation(300);
    for real in [Bpe::o200k_base(), Bpe::cl100k_base()] {
        let real_cost: Vec<u64> = conversation
            .iter()
            .map(|m| u64::from(real.count_message(m)))
            .collect();
        let chars_cost: Vec<u64> = conversation
            .iter()
            .map(|m| u64::from(CharsOver4.count_message(m)))
            .collect();
        let window = ContextWindow::tokens(8_000);
        let mut index = ContextIndex::default();
        let mut history: Vec<Message> = Vec::new();
        let (mut raw, mut calibrated, mut chars) =
            (Errors::default(), Errors::default(), Errors::default());
        for (k, message) in conversation.iter().enumerate() {
            let mut message = message.clone();
            if message.role == Role::Assistant && k > 1 {
                let view = index
                    .view(&history, &window)
                    .expect("the system message fits");
                let positions =
                    (0..view.system().len()).chain(view.ranges().iter().flat_map(|r| r.clone()));
                let (real_tokens, chars_tokens) =
                    positions.fold((0, 0), |(r, c), p| (r + real_cost[p], c + chars_cost[p]));
                assert!(view.tokens() <= 8_000);
                if view.calibration() != 1.0 {
                    calibrated.add(view.tokens(), real_tokens);
                }
                raw.add(view.estimated_tokens(), real_tokens);
                chars.add(chars_tokens, real_tokens);
                message = message.with_usages(TokenUsages::new(50, real_tokens as i64));
            }
            history.push(message);
        }
        for (name, errors) in [
            ("chars/4 (AgentFlow)", &chars),
            ("Estimate", &raw),
            ("Estimate, calibrated", &calibrated),
        ] {
            println!(
                "| {} | {name} | {:.2}% | {:.2}% | {:+.2}% | {} |",
                real.name(),
                errors.mean_abs(),
                errors.p95(),
                errors.bias(),
                errors.abs.len()
            );
        }
        assert!(calibrated.abs.len() > 400, "most calls are calibrated");
        assert!(
            calibrated.mean_abs() <= 2.0,
            "calibrated error {:.2}% against {}",
            calibrated.mean_abs(),
            real.name()
        );
        assert!(
            calibrated.mean_abs() < raw.mean_abs() && raw.mean_abs() < chars.mean_abs(),
            "calibration improves the estimate, which beats chars/4"
        );
    }
}
