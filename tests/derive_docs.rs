//! The derive's own rustdoc cannot run its example (`agentstate-derive` does not depend on the
//! runtime), so it is `ignore`d there and says it runs, identical, as the first example of
//! `agentstate::_derive`. This test keeps the two identical.

use std::path::Path;

/// The lines of the first code block that opens with `fence` in `file`, its doc-comment prefix
/// (`prefix`, then one space if any) removed.
fn first_block(file: &str, prefix: &str, fence: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    let lines: Vec<String> = text
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix(prefix))
        .map(|line| line.strip_prefix(' ').unwrap_or(line).to_string())
        .collect();
    let start = lines
        .iter()
        .position(|l| l == fence)
        .unwrap_or_else(|| panic!("{file} has no block opening with {fence}"))
        + 1;
    let len = lines[start..]
        .iter()
        .position(|l| l == "```")
        .unwrap_or_else(|| panic!("{file}: the block opening with {fence} is not closed"));
    lines[start..start + len].to_vec()
}

#[test]
fn the_derives_ignored_example_is_the_first_running_one_of_the_reference() {
    let derive = first_block("agentstate-derive/src/lib.rs", "///", "```ignore");
    let reference = first_block("agentstate/src/_derive.rs", "//!", "```");
    assert!(
        derive.len() > 5,
        "the derive's example is there: {derive:?}"
    );
    assert_eq!(derive, reference);
}
