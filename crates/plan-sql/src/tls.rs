//! Connections to PostgreSQL: TLS by rustls with ring and the platform's certificate
//! roots (as the HTTP clients'), when the URL's `sslmode` is not `disable`; `prefer` (the
//! default) falls back to a plain connection when the server offers no TLS, `require`
//! does not.

use std::sync::Arc;

use postgres::config::SslMode;
use postgres::{Client, Config, NoTls};
use rustls_platform_verifier::BuilderVerifierExt;

use crate::DbError;

/// Names the connections of `config` `planvm` in `pg_stat_activity`, unless the URL names
/// them (`?application_name=`): the connections of many workers are told apart so.
pub fn name_connections(config: &mut Config) {
    if config.get_application_name().is_none() {
        config.application_name("planvm");
    }
}

/// A client of the server `config` names, over TLS unless `sslmode=disable` (see the
/// module docs).
pub fn connect_postgres(config: &Config) -> Result<Client, DbError> {
    let failed = |e: postgres::Error| DbError::Unavailable(connect_failure(config, &e));
    if config.get_ssl_mode() == SslMode::Disable {
        return config.connect(NoTls).map_err(failed);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_platform_verifier())
        .map_err(|e| DbError::Config(format!("cannot set up TLS: {e}")))?
        .with_no_client_auth();
    config
        .connect(tokio_postgres_rustls::MakeRustlsConnect::new(tls))
        .map_err(failed)
}

/// Why connecting to the database `config` names failed, for messages. The client's own
/// words for an error of the database are only "db error": the database's message is
/// given instead, and a login it refused says for which user (never with what password).
fn connect_failure(config: &Config, e: &postgres::Error) -> String {
    let Some(db) = e.as_db_error() else {
        // NB: "error connecting to server" alone: its cause says why (refused, no route).
        let mut said = e.to_string();
        let mut cause = std::error::Error::source(e);
        while let Some(c) = cause {
            let text = c.to_string();
            if !said.contains(&text) {
                said = format!("{said}: {text}");
            }
            cause = c.source();
        }
        return said;
    };
    let code = db.code();
    if *code == postgres::error::SqlState::INVALID_PASSWORD
        || *code == postgres::error::SqlState::INVALID_AUTHORIZATION_SPECIFICATION
    {
        let user = config.get_user().unwrap_or("(none given)");
        format!(
            "authentication failed for user `{user}`: {} ({})",
            db.message(),
            code.code()
        )
    } else {
        format!("{} ({})", db.message(), code.code())
    }
}
