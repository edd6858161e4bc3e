//! The workspace's root package: it owns the top-level `tests/`, `examples/` and `benches/` so
//! that `cargo test --workspace` runs them and `cargo run --example NAME` works from the root.
//! It has no API of its own.
