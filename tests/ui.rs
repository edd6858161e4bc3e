//! Compile-time checks of `#[derive(AgentState)]`: every file in `tests/ui/` must fail to
//! compile with the `.stderr` beside it, every file in `tests/ui/pass/` must compile and run.
//! Regenerate snapshots with `TRYBUILD=overwrite cargo test --test ui` and read each one.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
