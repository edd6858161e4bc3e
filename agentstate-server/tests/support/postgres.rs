//! What the PostgreSQL tests share.

use agentstate_store::postgres::PostgresOptions;

/// The tests' PostgreSQL database (`AGENTSTATE_POSTGRES_URL`) and the options of a schema of
/// the test's own on it (`{prefix}_{process id}`); `None`, with a line saying that `what` is
/// skipped, when the variable is not set (under CI, where it must be, a failure).
#[allow(dead_code)] // the pool test, which includes this file too, has a main of its own
pub fn database(prefix: &str, what: &str) -> Option<(String, PostgresOptions)> {
    let Ok(url) = std::env::var("AGENTSTATE_POSTGRES_URL") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "AGENTSTATE_POSTGRES_URL is not set under CI"
        );
        println!("skipped: {what} (AGENTSTATE_POSTGRES_URL not set)");
        return None;
    };
    let options = PostgresOptions {
        schema: format!("{prefix}_{}", std::process::id()),
        ..PostgresOptions::default()
    };
    Some((url, options))
}

/// Drops schema `schema` (a test's own) of the database at `url`, with what is in it.
pub async fn drop_schema(url: &str, schema: &str) {
    let (admin, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let connection = tokio::spawn(connection);
    admin
        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
        .await
        .unwrap();
    drop(admin);
    let _ = connection.await;
}
