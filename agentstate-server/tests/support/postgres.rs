//! What the PostgreSQL tests share.

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
