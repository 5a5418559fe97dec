//! TLS on the public listener (docs/serving.md "TLS"): rustls with the operator's certificate chain
//! and key, ALPN `h2` and `http/1.1`, and optionally client certificates verified against a CA
//! bundle (mutual TLS: an unknown issuer or an expired certificate fails the handshake; a
//! connection without one is still served, and the instances taking `mtls` refuse it). The files
//! are checked every `watchMs` and taken up when they change; files that do not load keep the
//! running configuration, and the log says why.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use serde::{Deserialize, Serialize};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

/// `[tls]`: the listener's certificate, and the CA bundle client certificates are checked
/// against.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsSettings {
    /// The certificate chain (PEM, leaf first).
    pub cert_file: PathBuf,
    /// Its private key (PEM).
    pub key_file: PathBuf,
    /// CA bundle (PEM) for client certificates; none: no client certificates are asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_ca_file: Option<PathBuf>,
    /// How often the files are checked for changes, ms.
    #[serde(default = "default_watch_ms")]
    pub watch_ms: u64,
}

fn default_watch_ms() -> u64 {
    5_000
}

/// When and how large each file was: a change of either is a change of the file.
type Stamp = Vec<Option<(SystemTime, u64)>>;

/// The listener's TLS: its current configuration, replaced when the files change.
pub struct Tls {
    settings: TlsSettings,
    current: RwLock<(TlsAcceptor, Stamp)>,
}

impl Tls {
    /// Loads the files of `settings`; the error names the file and what is wrong.
    pub fn load(settings: TlsSettings) -> anyhow::Result<Tls> {
        let stamp = stamp(&settings);
        let acceptor = acceptor(&settings)?;
        Ok(Tls {
            settings,
            current: RwLock::new((acceptor, stamp)),
        })
    }

    /// The acceptor for the next connection.
    pub fn acceptor(&self) -> TlsAcceptor {
        self.current.read().unwrap().0.clone()
    }

    /// Whether client certificates are asked for (the `mtls` scheme can be offered).
    pub fn client_certificates(&self) -> bool {
        self.settings.client_ca_file.is_some()
    }

    /// Takes up changed files: `None` when nothing changed, else whether they loaded.
    pub fn reload_if_changed(&self) -> Option<anyhow::Result<()>> {
        let now = stamp(&self.settings);
        if self.current.read().unwrap().1 == now {
            return None;
        }
        let loaded = acceptor(&self.settings);
        let mut current = self.current.write().unwrap();
        // Failed files are not retried until they change again.
        current.1 = now;
        Some(loaded.map(|a| current.0 = a))
    }

    /// Checks the files every `watchMs` until `stop`.
    pub async fn watch(self: Arc<Self>, stop: CancellationToken) {
        let every = Duration::from_millis(self.settings.watch_ms.max(100));
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
            match self.reload_if_changed() {
                None => {}
                Some(Ok(())) => tracing::info!(
                    cert = %self.settings.cert_file.display(),
                    "TLS files changed; new connections use them"
                ),
                Some(Err(e)) => tracing::error!(
                    error = %format!("{e:#}"),
                    "TLS files changed but do not load; the running certificate stays"
                ),
            }
        }
    }
}

fn stamp(s: &TlsSettings) -> Stamp {
    let of = |p: &Path| {
        std::fs::metadata(p)
            .ok()
            .and_then(|m| Some((m.modified().ok()?, m.len())))
    };
    [
        Some(&s.cert_file),
        Some(&s.key_file),
        s.client_ca_file.as_ref(),
    ]
    .into_iter()
    .flatten()
    .map(|p| of(p))
    .collect()
}

/// The rustls configuration of `s`.
fn acceptor(s: &TlsSettings) -> anyhow::Result<TlsAcceptor> {
    let chain = crate::pem_files::certificates(&s.cert_file, "[tls] certFile")?;
    let key = crate::pem_files::private_key(&s.key_file, "[tls] keyFile")?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow::anyhow!("[tls]: {e}"))?;
    let builder = match &s.client_ca_file {
        None => builder.with_no_client_auth(),
        Some(file) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in crate::pem_files::certificates(file, "[tls] clientCaFile")? {
                roots
                    .add(cert)
                    .map_err(|e| anyhow::anyhow!("[tls] clientCaFile {}: {e}", file.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .map_err(|e| anyhow::anyhow!("[tls] clientCaFile {}: {e}", file.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(chain, key).map_err(|e| {
        anyhow::anyhow!(
            "[tls] keyFile {} does not go with certFile {}: {e}",
            s.key_file.display(),
            s.cert_file.display()
        )
    })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The longest name a client certificate gives a principal.
const MAX_NAME: usize = 256;

/// The names of a connection's client certificate (verified in the handshake).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PeerCert {
    /// The subject's common name.
    pub subject: Option<String>,
    /// The first subject alternative name (DNS, URI or e-mail).
    pub san: Option<String>,
}

impl PeerCert {
    /// The names in a DER certificate; names that are not printable, or longer than 256
    /// characters, are left out.
    pub fn from_der(der: &[u8]) -> PeerCert {
        use x509_parser::extensions::GeneralName;
        let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
            return PeerCert::default();
        };
        let fit = |s: &str| {
            (!s.is_empty() && s.len() <= MAX_NAME && s.chars().all(|c| c.is_ascii_graphic()))
                .then(|| s.to_owned())
        };
        let subject = cert
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .and_then(fit);
        let san = cert
            .subject_alternative_name()
            .ok()
            .flatten()
            .and_then(|ext| {
                ext.value.general_names.iter().find_map(|n| match n {
                    GeneralName::DNSName(s) | GeneralName::URI(s) | GeneralName::RFC822Name(s) => {
                        fit(s)
                    }
                    _ => None,
                })
            });
        PeerCert { subject, san }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert(cn: &str, sans: &[&str]) -> Vec<u8> {
        let mut params =
            rcgen::CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn a_certificate_names_its_subject_and_first_alternative_name() {
        let names = PeerCert::from_der(&cert("alice", &["alice.example.com", "b.example.com"]));
        assert_eq!(names.subject.as_deref(), Some("alice"));
        assert_eq!(names.san.as_deref(), Some("alice.example.com"));
        let spaced = PeerCert::from_der(&cert("has space", &[]));
        assert_eq!(spaced, PeerCert::default());
        assert_eq!(PeerCert::from_der(b"not DER"), PeerCert::default());
    }

    #[test]
    fn files_that_do_not_load_name_themselves_and_keep_the_running_ones() {
        let dir = tempfile::tempdir().unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let c = rcgen::CertificateParams::new(vec!["localhost".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let (cert_file, key_file) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        std::fs::write(&cert_file, c.pem()).unwrap();
        std::fs::write(&key_file, key.serialize_pem()).unwrap();
        let settings = TlsSettings {
            cert_file: cert_file.clone(),
            key_file: key_file.clone(),
            client_ca_file: None,
            watch_ms: 100,
        };
        let tls = Tls::load(settings.clone()).unwrap();
        assert!(tls.reload_if_changed().is_none());
        std::fs::write(&key_file, "garbage, and longer than before").unwrap();
        let e = format!("{:#}", tls.reload_if_changed().unwrap().unwrap_err());
        assert!(e.contains("k.pem") && e.contains("keyFile"), "{e}");
        assert!(
            tls.reload_if_changed().is_none(),
            "not retried until it changes"
        );
        let other = rcgen::KeyPair::generate().unwrap();
        std::fs::write(&key_file, other.serialize_pem()).unwrap();
        let e = format!("{:#}", tls.reload_if_changed().unwrap().unwrap_err());
        assert!(e.contains("does not go with"), "{e}");
        let missing = TlsSettings {
            cert_file: dir.path().join("none.pem"),
            ..settings
        };
        let e = format!("{:#}", Tls::load(missing).err().unwrap());
        assert!(e.contains("none.pem") && e.contains("certFile"), "{e}");
    }
}
