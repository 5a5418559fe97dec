//! The PostgreSQL test cluster: `A2A_EDGE_TEST_POSTGRES`, the URL of a role that may create
//! databases (`.ci/postgres.sh start` prints one).

use a2a_edge::config::Config;

use crate::Server;
use crate::faults::Proxy;

/// What the PostgreSQL tests lack here, if anything.
pub fn postgres_missing() -> Option<String> {
    std::env::var_os("A2A_EDGE_TEST_POSTGRES")
        .is_none()
        .then(|| {
            "set A2A_EDGE_TEST_POSTGRES to a PostgreSQL URL (.ci/postgres.sh start prints one)"
                .into()
        })
}

/// The URL of a fresh database on the test cluster (run only where [`postgres_missing`] says
/// nothing is missing).
pub async fn fresh_postgres() -> String {
    let url = std::env::var("A2A_EDGE_TEST_POSTGRES")
        .expect("set A2A_EDGE_TEST_POSTGRES to the URL of a role that may create databases");
    let name = format!("a2a_edge_it_{}", uuid::Uuid::new_v4().simple());
    database(&url)
        .await
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    let (base, _) = url.rsplit_once('/').unwrap();
    format!("{base}/{name}")
}

/// A client connection to the database of `url`.
pub async fn database(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// A node in this process whose database calls go through a fault proxy (calls time out after
/// 1 s): the proxy and the node. `config` makes its config from the database URL.
pub async fn behind_proxy(url: &str, config: impl FnOnce(&str) -> Config) -> (Proxy, Server) {
    let (proxy, through) = Proxy::to_postgres(url).await;
    let mut c = config(&through);
    c.storage.timeout_ms = 1000;
    (proxy, Server::start(c).await)
}
