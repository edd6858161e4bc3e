//! A `tracing` subscriber that records every span (name, parent, fields) and event, for the
//! tests of the runner's spans (`tracing.rs`, and OpenArmature sessions 012 in
//! `conformance_durable.rs`): no subscriber crate.
#![allow(dead_code)] // each test file uses its part

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

#[derive(Debug, Clone)]
pub struct SpanData {
    pub name: &'static str,
    pub parent: Option<u64>,
    pub fields: BTreeMap<String, String>,
}

#[derive(Debug, Clone)]
pub struct EventData {
    pub span: Option<u64>,
    pub fields: BTreeMap<String, String>,
}

#[derive(Default)]
pub struct Recorded {
    pub spans: BTreeMap<u64, SpanData>,
    pub events: Vec<EventData>,
}

#[derive(Clone, Default)]
pub struct Capture {
    pub recorded: Arc<Mutex<Recorded>>,
    next: Arc<AtomicU64>,
}

thread_local! {
    /// The spans entered on this thread, innermost last.
    static ENTERED: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, attributes: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        let parent = match attributes.parent() {
            Some(parent) => Some(parent.into_u64()),
            None if attributes.is_contextual() => ENTERED.with(|e| e.borrow().last().copied()),
            None => None,
        };
        let mut fields = BTreeMap::new();
        attributes.record(&mut Fields(&mut fields));
        let name = attributes.metadata().name();
        let span = SpanData {
            name,
            parent,
            fields,
        };
        self.recorded.lock().unwrap().spans.insert(id, span);
        Id::from_u64(id)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut recorded = self.recorded.lock().unwrap();
        if let Some(span) = recorded.spans.get_mut(&span.into_u64()) {
            values.record(&mut Fields(&mut span.fields));
        }
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let span = ENTERED.with(|e| e.borrow().last().copied());
        self.recorded
            .lock()
            .unwrap()
            .events
            .push(EventData { span, fields });
    }

    fn enter(&self, span: &Id) {
        ENTERED.with(|e| e.borrow_mut().push(span.into_u64()));
    }

    fn exit(&self, span: &Id) {
        ENTERED.with(|e| {
            let mut entered = e.borrow_mut();
            if let Some(at) = entered.iter().rposition(|s| *s == span.into_u64()) {
                entered.remove(at);
            }
        });
    }
}

impl Capture {
    /// Runs `future` to its end on a current-thread runtime with this subscriber.
    pub fn run<F: std::future::Future>(&self, future: F) -> F::Output {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime");
        tracing::subscriber::with_default(self.clone(), || runtime.block_on(future))
    }

    pub fn spans(&self, name: &str) -> Vec<(u64, SpanData)> {
        let recorded = self.recorded.lock().unwrap();
        recorded
            .spans
            .iter()
            .filter(|(_, s)| s.name == name)
            .map(|(id, s)| (*id, s.clone()))
            .collect()
    }

    pub fn events(&self) -> Vec<EventData> {
        self.recorded.lock().unwrap().events.clone()
    }
}

pub fn field<'a>(span: &'a SpanData, name: &str) -> Option<&'a str> {
    span.fields.get(name).map(String::as_str)
}
