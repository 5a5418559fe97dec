//! PEM files the operator names (a CA bundle, a certificate chain, a private key), read with
//! errors that name the setting and the file.

use std::path::Path;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The certificates of `file`, which `setting` names; at least one.
pub fn certificates(file: &Path, setting: &str) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(file)
        .map_err(|e| anyhow::anyhow!("{setting} {} cannot be read: {e}", file.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("{setting} {} is not PEM: {e}", file.display()))?;
    if certs.is_empty() {
        anyhow::bail!(
            "{setting} {} holds no certificate (a PEM file of -----BEGIN CERTIFICATE----- blocks)",
            file.display()
        );
    }
    Ok(certs)
}

/// The private key of `file` (PKCS#8, PKCS#1 or SEC1), which `setting` names.
pub fn private_key(file: &Path, setting: &str) -> anyhow::Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(file).map_err(|e| {
        anyhow::anyhow!(
            "{setting} {} holds no usable private key (a PEM -----BEGIN PRIVATE KEY----- block): {e}",
            file.display()
        )
    })
}
