//! Connections to PostgreSQL: TLS by rustls with ring and the platform's certificate
//! roots (as the HTTP clients'), when the URL's `sslmode` is not `disable`; `prefer` (the
//! default) falls back to a plain connection when the server offers no TLS, `require`
//! does not.

use std::sync::Arc;

use postgres::config::SslMode;
use postgres::{Client, Config, NoTls};
use rustls_platform_verifier::BuilderVerifierExt;

/// Names the connections of `config` `planvm` in `pg_stat_activity`, unless the URL names
/// them (`?application_name=`): the connections of many workers are told apart so.
pub fn name_connections(config: &mut Config) {
    if config.get_application_name().is_none() {
        config.application_name("planvm");
    }
}

/// A client of the server `config` names, over TLS unless `sslmode=disable` (see the
/// module docs).
pub fn connect_postgres(config: &Config) -> Result<Client, String> {
    if config.get_ssl_mode() == SslMode::Disable {
        return config
            .connect(NoTls)
            .map_err(|e| crate::pg::connect_failure(config, &e));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_platform_verifier())
        .map_err(|e| format!("cannot set up TLS: {e}"))?
        .with_no_client_auth();
    config
        .connect(tokio_postgres_rustls::MakeRustlsConnect::new(tls))
        .map_err(|e| crate::pg::connect_failure(config, &e))
}
