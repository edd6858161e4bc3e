//! Records a layer above the store keeps beside its threads, in the same database (a server's
//! runs and its threads' bookkeeping): JSON documents by kind and id, each optionally tied to a
//! thread id, written whole.
//!
//! The store does not read a record's JSON: its type, and the version of that type, are the
//! owner's (`agentstate-server`'s run record is one serde-tagged, versioned type). The table,
//! `agentstate_records`, is created when the database is opened if it is missing; it is not
//! part of the threads' tables' version, and deleting a thread does not delete its records.

use crate::backend::Backend;
use crate::error::StoreError;
use crate::store::Store;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::future::Future;

/// A record's row: what a [`RecordBackend`] moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordRow {
    /// What it is (`"run"`, say): records of different kinds may share ids.
    pub kind: String,
    /// Its id, unique within its kind.
    pub id: String,
    /// The thread it belongs to, if any (to list a thread's records).
    pub thread: Option<String>,
    /// Its JSON text.
    pub body: String,
    /// When it was first put, in milliseconds since the Unix epoch.
    pub created_ms: i64,
}

/// A backend that keeps records beside its threads (implemented by `Sqlite`).
pub trait RecordBackend: Backend {
    /// Inserts or replaces the record `(row.kind, row.id)`; a replaced record keeps its
    /// `created_ms`.
    fn put_record(&self, row: RecordRow) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The record `(kind, id)`, if there is one.
    fn get_record(
        &self,
        kind: &str,
        id: &str,
    ) -> impl Future<Output = Result<Option<RecordRow>, StoreError>> + Send;

    /// The records of `kind` (those of `thread` only, if given), oldest first (by creation,
    /// then id).
    fn list_records(
        &self,
        kind: &str,
        thread: Option<&str>,
    ) -> impl Future<Output = Result<Vec<RecordRow>, StoreError>> + Send;

    /// Deletes the record `(kind, id)`; false if there was none.
    fn delete_record(
        &self,
        kind: &str,
        id: &str,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;
}

impl<B: RecordBackend> Store<B> {
    /// Puts `value` as record `(kind, id)` (replacing it), tied to `thread` if given.
    ///
    /// ```
    /// use agentstate_store::SqliteStore;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let store = SqliteStore::open_in_memory()?;
    /// store.put_record("run", "r-1", Some("t-1"), &serde_json::json!({"status": "pending"})).await?;
    /// store.put_record("run", "r-1", Some("t-1"), &serde_json::json!({"status": "success"})).await?;
    /// let run: Option<serde_json::Value> = store.record("run", "r-1").await?;
    /// assert_eq!(run.unwrap()["status"], "success");
    /// assert_eq!(store.records::<serde_json::Value>("run", Some("t-1")).await?.len(), 1);
    /// assert!(store.delete_record("run", "r-1").await?);
    /// # Ok::<(), agentstate_store::StoreError>(())
    /// # }).unwrap();
    /// ```
    pub async fn put_record<T: Serialize>(
        &self,
        kind: &str,
        id: &str,
        thread: Option<&str>,
        value: &T,
    ) -> Result<(), StoreError> {
        let body = serde_json::to_string(value).map_err(|e| StoreError::Record {
            kind: kind.to_owned(),
            id: id.to_owned(),
            reason: e.to_string(),
        })?;
        self.backend()
            .put_record(RecordRow {
                kind: kind.to_owned(),
                id: id.to_owned(),
                thread: thread.map(str::to_owned),
                body,
                created_ms: crate::record::now_ms(),
            })
            .await
    }

    /// The record `(kind, id)` read as a `T`, if there is one.
    pub async fn record<T: DeserializeOwned>(
        &self,
        kind: &str,
        id: &str,
    ) -> Result<Option<T>, StoreError> {
        match self.backend().get_record(kind, id).await? {
            Some(row) => read(&row).map(Some),
            None => Ok(None),
        }
    }

    /// The records of `kind` (of `thread` only, if given), oldest first, each read as a `T`.
    pub async fn records<T: DeserializeOwned>(
        &self,
        kind: &str,
        thread: Option<&str>,
    ) -> Result<Vec<T>, StoreError> {
        let rows = self.backend().list_records(kind, thread).await?;
        rows.iter().map(read).collect()
    }

    /// Deletes the record `(kind, id)`; false if there was none.
    pub async fn delete_record(&self, kind: &str, id: &str) -> Result<bool, StoreError> {
        self.backend().delete_record(kind, id).await
    }
}

fn read<T: DeserializeOwned>(row: &RecordRow) -> Result<T, StoreError> {
    serde_json::from_str(&row.body).map_err(|e| StoreError::Record {
        kind: row.kind.clone(),
        id: row.id.clone(),
        reason: e.to_string(),
    })
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use crate::SqliteStore;
    use serde_json::{json, Value};

    #[tokio::test]
    async fn records_survive_a_reopen_keep_their_creation_and_filter_by_thread() {
        let dir = std::env::temp_dir().join(format!("agentstate-records-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("records.db");
        let _ = std::fs::remove_file(&path);
        {
            let store = SqliteStore::open(&path).unwrap();
            store
                .put_record("run", "a", Some("t1"), &json!({"n": 1}))
                .await
                .unwrap();
            store
                .put_record("run", "b", Some("t2"), &json!({"n": 2}))
                .await
                .unwrap();
            store
                .put_record("thread", "a", None, &json!({"n": 3}))
                .await
                .unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        let before = store.backend().get_record_row("run", "a").await;
        store
            .put_record("run", "a", Some("t1"), &json!({"n": 4}))
            .await
            .unwrap();
        let after = store.backend().get_record_row("run", "a").await;
        assert_eq!(before.created_ms, after.created_ms);
        assert_eq!(after.body, r#"{"n":4}"#);
        let t1: Vec<Value> = store.records("run", Some("t1")).await.unwrap();
        assert_eq!(t1, [json!({"n": 4})]);
        let all: Vec<Value> = store.records("run", None).await.unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(
            store.record::<Value>("thread", "a").await.unwrap(),
            Some(json!({"n": 3}))
        );
        assert!(store.delete_record("run", "b").await.unwrap());
        assert!(!store.delete_record("run", "b").await.unwrap());
        let wrong = store.record::<u32>("thread", "a").await.unwrap_err();
        assert_eq!(wrong.category(), "store_corrupt_data");
        assert!(
            wrong
                .to_string()
                .starts_with("thread record `a` does not read"),
            "{wrong}"
        );
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    impl crate::sqlite::Sqlite {
        async fn get_record_row(&self, kind: &str, id: &str) -> crate::RecordRow {
            use crate::RecordBackend;
            self.get_record(kind, id).await.unwrap().unwrap()
        }
    }
}
