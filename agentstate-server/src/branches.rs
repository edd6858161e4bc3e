//! A thread's branches. A run from an earlier checkpoint, or a state update at one, takes the
//! thread back there and goes on from it, as LangGraph's fork does; what came after is not
//! removed but kept as a branch: a copy of the thread's timeline in a store thread of its own
//! ([`Branch`]), listed in the thread's history beside its head (each branch's own checkpoints
//! after its fork point, the first one's parent the checkpoint it forked from), read at its
//! checkpoints (`b1-5`), and run from as the head is: the thread's head then becomes that
//! branch, and what it was becomes a branch in its turn.

use crate::assistant::{Assistant, AssistantError};
use crate::checkpoints::CheckpointId;
use crate::record::{Branch, Record, ThreadRecord};
use crate::records::Records;

/// The branch that holds version `version` of branch `branch` (`None`: the head): the branch
/// itself, or, at and before its fork point, the one it forks from, and so on.
pub(crate) fn owner(branches: &[Branch], branch: Option<usize>, version: u64) -> Option<usize> {
    let mut at = branch;
    while let Some(b) = at.and_then(|i| branches.get(i)) {
        if version > b.fork {
            break;
        }
        at = b.parent;
    }
    at
}

/// Makes checkpoint `target` of thread `thread` where the thread's head goes on from: keeps
/// what the head holds after it as a new branch, and, for a checkpoint of a branch, makes that
/// branch the head. Returns the head's version to take the thread back to (the caller's
/// [`rewind`](Assistant::rewind), which a run does under the thread's lease). The thread's
/// record is written with its branches. Nothing is kept for the head's newest checkpoint.
pub(crate) async fn fork_at(
    records: &dyn Records,
    assistant: &dyn Assistant,
    thread: &mut ThreadRecord,
    target: CheckpointId,
) -> Result<u64, AssistantError> {
    let id = thread.thread_id.clone();
    let version = target.version();
    let head = assistant.snapshot(&id, None).await?.version;
    let Some(branch) = target.branch else {
        if version >= head {
            return Ok(version);
        }
        keep_head(assistant, thread, version).await?;
        put(records, thread).await?;
        return Ok(version);
    };
    let Some(chosen) = thread.branches.get(branch).cloned() else {
        return Err(AssistantError::new(
            "checkpoint_not_found",
            format!("checkpoint `{target}` of thread `{id}` names branch {branch}, which the thread does not have"),
        ));
    };
    // Where the head and the chosen branch part: the lowest fork point on the way from the
    // branch to the head.
    let mut parting = chosen.fork;
    let mut at = chosen.parent;
    while let Some(b) = at.and_then(|i| thread.branches.get(i)) {
        parting = parting.min(b.fork);
        at = b.parent;
    }
    keep_head(assistant, thread, parting).await?;
    // The head becomes the chosen branch's timeline (up to the checkpoint, once the caller
    // took it back there).
    delete_store(records, &id).await?;
    assistant.copy(&chosen.store_id, &id).await?;
    for (i, b) in thread.branches.iter_mut().enumerate() {
        if i == branch {
            // What the head holds now is no longer its own.
            b.fork = version;
            b.parent = None;
        } else if b.parent == Some(branch) && b.fork <= version {
            b.parent = None;
        }
    }
    put(records, thread).await?;
    Ok(version)
}

/// Keeps what thread `thread`'s head holds after version `fork` as a new branch (a copy of
/// the head), the branches that forked from the head after that point now forking from it.
async fn keep_head(
    assistant: &dyn Assistant,
    thread: &mut ThreadRecord,
    fork: u64,
) -> Result<(), AssistantError> {
    let kept = thread.branches.len();
    let store_id = format!("{}#branch-{}", thread.thread_id, uuid::Uuid::new_v4());
    assistant.copy(&thread.thread_id, &store_id).await?;
    for b in &mut thread.branches {
        if b.parent.is_none() && b.fork > fork {
            b.parent = Some(kept);
        }
    }
    thread.branches.push(Branch {
        store_id,
        fork,
        parent: None,
    });
    Ok(())
}

async fn put(records: &dyn Records, thread: &ThreadRecord) -> Result<(), AssistantError> {
    records
        .put(Record::Thread(thread.clone()))
        .await
        .map_err(AssistantError::from)
}

async fn delete_store(records: &dyn Records, id: &str) -> Result<(), AssistantError> {
    records
        .delete_state(id)
        .await
        .map(drop)
        .map_err(AssistantError::from)
}

/// Deletes thread `thread`'s branches' store threads (the thread is deleted).
pub(crate) async fn delete_all(records: &dyn Records, thread: &ThreadRecord) {
    for b in &thread.branches {
        let _ = records.delete_state(&b.store_id).await;
    }
}

/// Copies thread `from`'s branches for its copy `to` (each branch a store thread of the copy's
/// own); the copy's record takes the result.
pub(crate) async fn copy_all(
    assistant: &dyn Assistant,
    from: &ThreadRecord,
    to: &str,
) -> Result<Vec<Branch>, AssistantError> {
    let mut copied = Vec::with_capacity(from.branches.len());
    for b in &from.branches {
        let store_id = format!("{to}#branch-{}", uuid::Uuid::new_v4());
        assistant.copy(&b.store_id, &store_id).await?;
        copied.push(Branch {
            store_id,
            ..b.clone()
        });
    }
    Ok(copied)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn branch(fork: u64, parent: Option<usize>) -> Branch {
        Branch {
            store_id: String::new(),
            fork,
            parent,
        }
    }

    #[test]
    fn a_version_belongs_to_the_branch_it_was_made_on() {
        // Branch 0 forked from the head at 3; branch 1 from branch 0 at 5.
        let branches = [branch(3, None), branch(5, Some(0))];
        assert_eq!(owner(&branches, Some(1), 6), Some(1));
        assert_eq!(owner(&branches, Some(1), 5), Some(0));
        assert_eq!(owner(&branches, Some(1), 4), Some(0));
        assert_eq!(owner(&branches, Some(1), 3), None);
        assert_eq!(owner(&branches, None, 9), None);
    }
}
