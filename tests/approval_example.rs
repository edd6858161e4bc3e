//! The `approval` example as a person uses it: separate processes on one `./agentstate.db`,
//! one of them killed (SIGKILL on Unix) in the middle of a step.
//!
//! The example's binary is the one `cargo test` builds next to this test's
//! (`target/debug/examples/approval`); `cargo test --test approval_example` alone does not build
//! examples, so then these tests fail, if it is missing or older than its source, saying to run
//! `cargo build --example approval` first.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The compiled example, next to this test's binary (`target/<profile>/deps/..`).
fn example() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's own path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test runs from target/<profile>/deps");
    let path = dir
        .join("examples")
        .join(format!("approval{}", std::env::consts::EXE_SUFFIX));
    let built = std::fs::metadata(&path).and_then(|m| m.modified());
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/approval.rs");
    let edited = std::fs::metadata(source).and_then(|m| m.modified());
    match (built, edited) {
        (Err(_), _) => panic!(
            "the `approval` example is not built at {}: `cargo test --workspace` builds it, or run `cargo build --example approval` first",
            path.display()
        ),
        (Ok(built), Ok(edited)) if built < edited => panic!(
            "the `approval` example at {} is older than examples/approval.rs: run `cargo build --example approval` first",
            path.display()
        ),
        _ => path,
    }
}

/// A fresh working directory for one test's processes (its `agentstate.db`, `refunds.txt`).
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let dir =
            std::env::temp_dir().join(format!("agentstate-approval-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        Dir(dir)
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(example());
        command
            .args(args)
            .current_dir(&self.0)
            .env_remove("APPROVAL_SLOW_MS");
        command
    }

    /// Runs the example to its end: (exit code, stdout, stderr).
    fn run(&self, args: &[&str]) -> (i32, String, String) {
        let Output {
            status,
            stdout,
            stderr,
        } = self.command(args).output().expect("the example runs");
        let (out, err) = (
            String::from_utf8_lossy(&stdout).into_owned(),
            String::from_utf8_lossy(&stderr).into_owned(),
        );
        (status.code().unwrap_or(-1), out, err)
    }

    /// The payment service's lines: one per refund paid.
    fn refunds(&self) -> Vec<String> {
        std::fs::read_to_string(self.0.join("refunds.txt"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Each of `parts` is in `out`, in this order.
fn in_order(out: &str, parts: &[&str]) {
    let mut rest = out;
    for part in parts {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => panic!("`{part}` is not in the output after the parts before it:\n{out}"),
        }
    }
}

/// The run stops, waiting for an approval; asked again it still waits (nothing runs again);
/// approved, it pays once and answers; a second approval is refused.
#[test]
fn approve_finishes_and_pays_once() {
    let dir = Dir::new("approve");
    let (code, out, err) = dir.run(&[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("step 1: agent"), "{out}");
    assert!(
        out.contains("Waiting at step 2 for node `approval`"),
        "{out}"
    );
    assert!(out.contains("-- approve"), "{out}");
    // Streamed: the step's commit, then the question with the id an answer names.
    in_order(
        &out,
        &[
            "  step 1: agent",
            "reads \"My order #1042",
            "  step 1 committed: thread `refund-1042` at version 2",
            "  step 2: approval",
            "Waiting at step 2 for node `approval` (interrupt `approval:2.0:0@",
        ],
    );
    assert!(dir.refunds().is_empty(), "nothing is paid before approval");

    let (code, out, _) = dir.run(&[]);
    assert_eq!(code, 0);
    assert!(
        out.contains("Waiting at step 2") && !out.contains("step 1"),
        "{out}"
    );

    let (code, out, err) = dir.run(&["approve"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("a person approved"), "{out}");
    assert!(out.contains("paying, idempotency key"), "{out}");
    assert!(
        out.contains(
            "Answer: Your refund of 49.99 EUR for order 1042 is on its way (receipt R-1)."
        ),
        "{out}"
    );
    assert_eq!(dir.refunds().len(), 1);
    // Each step as it runs, what its node says, its commit; the answer as it is written.
    in_order(
        &out,
        &[
            "  step 2: approval",
            "a person approved the refund",
            "  step 2 committed: thread `refund-1042` at version 5",
            "  step 3: refund",
            "paying, idempotency key",
            "paid, receipt R-1",
            "  step 3 committed: thread `refund-1042` at version 7",
            "  step 4: reply",
            "\n          Your refund of 49.99 EUR for order 1042 is on its way (receipt R-1).\n",
            "  step 4 committed: thread `refund-1042` at version 8",
            "Finished.",
            "Answer: Your refund",
        ],
    );

    let (code, out, err) = dir.run(&["approve"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("error (run_state_invalid): thread `refund-1042`: its run finished"),
        "{err}"
    );
    let (code, out, _) = dir.run(&[]);
    assert_eq!(code, 0);
    assert!(out.contains("Answer: Your refund"), "{out}");
    assert_eq!(dir.refunds().len(), 1, "the refund is paid once");
}

/// Rejected, the run skips the refund and answers so.
#[test]
fn reject_skips_the_refund() {
    let dir = Dir::new("reject");
    assert_eq!(dir.run(&[]).0, 0);
    let (code, out, err) = dir.run(&["reject"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("a person rejected"), "{out}");
    assert!(!out.contains("paying, idempotency key"), "{out}");
    assert!(
        out.contains("Answer: Sorry, the refund for order 1042 was not approved."),
        "{out}"
    );
    assert!(dir.refunds().is_empty());

    // `reset` deletes the run: the next one asks again.
    assert_eq!(dir.run(&["reset"]).0, 0);
    let (code, out, _) = dir.run(&[]);
    assert_eq!(code, 0);
    assert!(
        out.contains("A new run") && out.contains("Waiting"),
        "{out}"
    );
}

/// Killed after the refund was paid and journaled but before its step was committed, the
/// next process waits out the dead one's lease, runs the step again without paying again, and
/// finishes.
#[test]
fn killed_mid_step_continues_and_pays_once() {
    let dir = Dir::new("kill");
    assert_eq!(dir.run(&[]).0, 0);

    let mut child = dir
        .command(&["approve"])
        .env("APPROVAL_SLOW_MS", "60000")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the example starts");
    let mut seen = String::new();
    let mut lines = BufReader::new(child.stdout.take().expect("its stdout")).lines();
    for line in lines.by_ref() {
        let line = line.expect("a line of output");
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("kill me now") {
            break;
        }
    }
    assert!(
        seen.contains("kill me now"),
        "the slow step never began:\n{seen}"
    );
    child.kill().expect("the example is killed");
    let status = child.wait().expect("the killed example is reaped");
    assert!(!status.success());
    assert_eq!(dir.refunds().len(), 1, "paid once before the kill");

    let (code, out, err) = dir.run(&[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("Continuing thread `refund-1042` after step 2 (next: refund)"),
        "{out}"
    );
    assert!(
        !out.contains("paying, idempotency key"),
        "the recorded refund is not paid again:\n{out}"
    );
    in_order(
        &out,
        &[
            "  step 3: refund",
            "paid, receipt R-1",
            "  step 3 committed: thread `refund-1042` at version 7",
            "  step 4: reply",
            "Answer: Your refund",
        ],
    );
    assert_eq!(dir.refunds().len(), 1, "the refund is paid once");
    let journal = out
        .lines()
        .find(|l| l.starts_with("Journal of"))
        .unwrap_or_default();
    assert_eq!(journal.matches(":effect").count(), 1, "{journal}");
}

/// An unknown command is refused before anything runs; an answer with no run, too.
#[test]
fn unknown_command_is_refused() {
    let dir = Dir::new("usage");
    let (code, _, err) = dir.run(&["approv"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown command `approv`"), "{err}");
    assert!(!dir.0.join("agentstate.db").exists());

    // An answer before any run asked anything names the missing thread.
    let (code, _, err) = dir.run(&["approve"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("error (thread_not_found): thread `refund-1042` does not exist"),
        "{err}"
    );
}
