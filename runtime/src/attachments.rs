//! The attachments service: `raw` file parts admitted by size and media type and stored
//! content-addressed under `<data-dir>/attachments/`, referred to by `a2a-edge://attachments/<sha256>`.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

use crate::config::AttachmentSettings;

/// The URL scheme and path prefix of attachment references.
pub const REFERENCE_PREFIX: &str = "a2a-edge://attachments/";

/// Stores admitted attachments.
pub struct Attachments {
    dir: PathBuf,
    settings: AttachmentSettings,
}

impl Attachments {
    /// The service over `<data-dir>/attachments`.
    pub fn new(data_dir: &std::path::Path, settings: AttachmentSettings) -> Attachments {
        Attachments {
            dir: data_dir.join("attachments"),
            settings,
        }
    }

    /// Whether `raw` parts are admitted.
    pub fn enabled(&self) -> bool {
        self.settings.enabled
    }

    /// Bytes stored (one directory read; the store is flat).
    pub fn stored_bytes(&self) -> u64 {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        entries
            .filter_map(|e| e.ok()?.metadata().ok())
            .filter(|m| m.is_file())
            .map(|m| m.len())
            .sum()
    }

    /// Checks and stores one attachment; returns its reference. Errors say what to fix.
    pub fn admit(
        &self,
        media_type: Option<&str>,
        filename: Option<&str>,
        b64: &str,
    ) -> Result<String, String> {
        if !self.settings.enabled {
            return Err("this agent does not accept file attachments".into());
        }
        let media = media_type.unwrap_or("application/octet-stream");
        if !self
            .settings
            .media_types
            .iter()
            .any(|m| m.eq_ignore_ascii_case(media))
        {
            return Err(format!(
                "attachment {} has media type {media}, which this agent does not accept (accepted: {})",
                name(filename),
                self.settings.media_types.join(", ")
            ));
        }
        let trimmed = b64.trim_end_matches('=');
        if trimmed.len() as u64 / 4 * 3 > self.settings.max_bytes {
            return Err(too_large(filename, self.settings.max_bytes));
        }
        let bytes = a2a_protocol::decode_base64(trimmed)
            .map_err(|e| format!("attachment {} is {e}", name(filename)))?;
        if bytes.len() as u64 > self.settings.max_bytes {
            return Err(too_large(filename, self.settings.max_bytes));
        }
        let sha = hex::encode(Sha256::digest(&bytes));
        let path = self.dir.join(&sha);
        if !path.exists() {
            std::fs::create_dir_all(&self.dir)
                .map_err(|e| format!("the attachment store is unavailable: {e}"))?;
            let tmp = self
                .dir
                .join(format!(".{sha}.{}", uuid::Uuid::new_v4().simple()));
            std::fs::write(&tmp, &bytes)
                .and_then(|_| std::fs::rename(&tmp, &path))
                .map_err(|e| format!("the attachment store is unavailable: {e}"))?;
        }
        Ok(format!("{REFERENCE_PREFIX}{sha}"))
    }

    /// The file of a reference, if it is one of ours and stored.
    pub fn path(&self, reference: &str) -> Option<PathBuf> {
        let sha = reference.strip_prefix(REFERENCE_PREFIX)?;
        (sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| self.dir.join(sha))
            .filter(|p| p.exists())
    }
}

fn name(filename: Option<&str>) -> &str {
    filename.unwrap_or("(unnamed)")
}

fn too_large(filename: Option<&str>, max: u64) -> String {
    format!(
        "attachment {} is larger than the limit of {max} bytes",
        name(filename)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(enabled: bool) -> (tempfile::TempDir, Attachments) {
        let dir = tempfile::tempdir().unwrap();
        let settings = AttachmentSettings {
            enabled,
            max_bytes: 8,
            media_types: vec!["text/plain".into()],
        };
        let a = Attachments::new(dir.path(), settings);
        (dir, a)
    }

    #[test]
    fn stores_content_addressed_and_dedupes() {
        let (_d, a) = service(true);
        let r1 = a
            .admit(Some("text/plain"), Some("h.txt"), "aGVsbG8=")
            .unwrap();
        let r2 = a.admit(Some("TEXT/PLAIN"), None, "aGVsbG8").unwrap();
        assert_eq!(r1, r2);
        assert_eq!(
            r1,
            format!(
                "{REFERENCE_PREFIX}2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
            )
        );
        assert_eq!(std::fs::read(a.path(&r1).unwrap()).unwrap(), b"hello");
        assert!(a.path("a2a-edge://attachments/../../etc/passwd").is_none());
    }

    #[test]
    fn refuses_what_it_must() {
        let (_d, a) = service(true);
        assert!(
            a.admit(Some("image/png"), None, "aGVsbG8=")
                .unwrap_err()
                .contains("media type image/png")
        );
        assert!(
            a.admit(Some("text/plain"), None, "aGVsbG8gd29ybGQ=")
                .unwrap_err()
                .contains("larger than the limit of 8 bytes")
        );
        assert!(
            a.admit(Some("text/plain"), None, "!!!!")
                .unwrap_err()
                .contains("not valid base64")
        );
        let (_d, off) = service(false);
        assert!(
            off.admit(Some("text/plain"), None, "aGVsbG8=")
                .unwrap_err()
                .contains("does not accept")
        );
    }
}
