//! How to reach the cluster: its nodes, and what it asks of a client beyond an address,
//! a login (`PasswordAuthenticator`) and TLS (client encryption, optionally with a client
//! certificate for clusters that require one).
//!
//! TLS goes through OpenSSL, which the Kafka client already links in (built from source,
//! statically). Each node's certificate must chain to the given CA and name the address
//! the driver connects to (an IP SAN): the driver learns the other nodes' addresses from
//! the cluster, so it checks each against that node's IP, not against a host name.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use openssl::ssl::{SslConnector, SslFiletype, SslMethod, SslVersion};
use openssl::x509::store::X509StoreBuilder;
use openssl::x509::X509;
use scylla::client::session::TlsContext;
use scylla::client::session_builder::SessionBuilder;

/// The nodes, and the login and TLS they ask for.
#[derive(Clone, Debug, Default)]
pub struct ScyllaCluster {
    /// `host:port` of one or more nodes.
    pub nodes: Vec<String>,
    pub credentials: Option<Credentials>,
    pub tls: Option<ScyllaTls>,
}

impl ScyllaCluster {
    /// A cluster that asks for no login and no TLS.
    pub fn open(nodes: Vec<String>) -> ScyllaCluster {
        ScyllaCluster { nodes, credentials: None, tls: None }
    }

    /// From settings as `RECAP_SCYLLA_NODES` (comma-separated), `RECAP_SCYLLA_USERNAME` and
    /// `RECAP_SCYLLA_PASSWORD` give them: no login when the username is empty (what the
    /// test kit and the benchmarks read from the engines' settings).
    pub fn from_settings(nodes: &str, username: &str, password: &str) -> ScyllaCluster {
        let mut cluster = ScyllaCluster::open(nodes.split(',').map(str::to_string).collect());
        if !username.is_empty() {
            cluster.credentials = Some(Credentials { username: username.to_owned(), password: password.to_owned() });
        }
        cluster
    }

    /// A session builder for these nodes, with the login and TLS set, connections bounded
    /// by `timeout`.
    pub fn builder(&self, timeout: Duration) -> SessionBuilder {
        let mut builder = SessionBuilder::new().known_nodes(&self.nodes).connection_timeout(timeout);
        if let Some(credentials) = &self.credentials {
            builder = builder.user(credentials.username.clone(), credentials.password.clone());
        }
        if let Some(tls) = &self.tls {
            builder = builder.tls_context(Some(tls.context.clone()));
        }
        builder
    }
}

/// A `PasswordAuthenticator` login. Its `Debug` never shows the password.
#[derive(Clone)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_struct("Credentials").field("username", &self.username).field("password", &"<redacted>").finish()
    }
}

/// Client encryption: the CA that signs the nodes' certificates and, for a cluster that
/// requires one, the client's certificate and key. Built once, from PEM files, at start:
/// a file that cannot be read or does not hold what it should is an error then, not at
/// the first connection.
#[derive(Clone)]
pub struct ScyllaTls {
    context: TlsContext,
    /// What it was built from, for `Debug` (never the key's content).
    files: Vec<PathBuf>,
}

impl fmt::Debug for ScyllaTls {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_struct("ScyllaTls").field("files", &self.files).finish()
    }
}

impl ScyllaTls {
    /// TLS 1.2 or later, each node's certificate verified against `ca_file` (PEM, one or
    /// more certificates), and only those (not the system's trusted roots, which
    /// `SslConnector` loads by default), and its IP address; `client` is a certificate
    /// chain and its private key (PEM files), presented to nodes that ask for one.
    pub fn from_pem_files(ca_file: &Path, client: Option<(&Path, &Path)>) -> Result<ScyllaTls, String> {
        let failed = |what: &str, path: &Path, error: openssl::error::ErrorStack| format!("{what} {}: {}", path.display(), first_reason(&error));
        let readable = |path: &Path| std::fs::metadata(path).map(|_| ()).map_err(|error| format!("{}: {error}", path.display()));
        let mut builder = SslConnector::builder(SslMethod::tls_client()).map_err(|error| format!("setting up TLS: {}", first_reason(&error)))?;
        builder.set_min_proto_version(Some(SslVersion::TLS1_2)).map_err(|error| format!("setting up TLS: {}", first_reason(&error)))?;
        let pem = std::fs::read(ca_file).map_err(|error| format!("{}: {error}", ca_file.display()))?;
        let certificates = X509::stack_from_pem(&pem).map_err(|error| failed("reading the CA certificates in", ca_file, error))?;
        if certificates.is_empty() {
            return Err(format!("reading the CA certificates in {}: no certificate found", ca_file.display()));
        }
        let mut trusted = X509StoreBuilder::new().map_err(|error| format!("setting up TLS: {}", first_reason(&error)))?;
        for certificate in certificates {
            trusted.add_cert(certificate).map_err(|error| failed("trusting the CA certificates in", ca_file, error))?;
        }
        builder.set_cert_store(trusted.build());
        let mut files = vec![ca_file.to_path_buf()];
        if let Some((certificate, key)) = client {
            readable(certificate)?;
            readable(key)?;
            builder.set_certificate_chain_file(certificate).map_err(|error| failed("reading the client certificate in", certificate, error))?;
            builder.set_private_key_file(key, SslFiletype::PEM).map_err(|error| failed("reading the client key in", key, error))?;
            builder.check_private_key().map_err(|error| failed("the client key does not match the certificate in", certificate, error))?;
            files.extend([certificate.to_path_buf(), key.to_path_buf()]);
        }
        let context = TlsContext::OpenSsl010Config(scylla::client::session::OpenSsl010Config::new(builder));
        Ok(ScyllaTls { context, files })
    }
}

/// OpenSSL's own words for the first error of a stack (its reason, e.g. "no certificate
/// or crl found"), or the whole stack when it has none.
fn first_reason(error: &openssl::error::ErrorStack) -> String {
    error.errors().first().and_then(|first| first.reason()).map_or_else(|| error.to_string(), str::to_string)
}
