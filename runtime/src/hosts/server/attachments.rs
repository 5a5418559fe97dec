//! `a2a:edge/attachments`: admission and content-addressed storage of `raw` parts.

use std::sync::Arc;

use super::bindings::attachments::Host;
use super::services::Services;
use crate::attachments::Attachments;

/// The attachments capability.
pub struct AttachmentsCtx(Arc<Attachments>);

impl AttachmentsCtx {
    /// The capability of a request: the runtime's attachments.
    pub fn prepare(s: &Services) -> AttachmentsCtx {
        AttachmentsCtx(s.attachments.clone())
    }
}

impl Host for AttachmentsCtx {
    fn admit(
        &mut self,
        media_type: Option<String>,
        filename: Option<String>,
        base64: String,
    ) -> wasmtime::Result<Result<String, String>> {
        Ok(self
            .0
            .admit(media_type.as_deref(), filename.as_deref(), &base64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admitted_parts_become_references_and_refusals_say_why() {
        let dir = tempfile::tempdir().unwrap();
        let mut ctx = AttachmentsCtx(super::super::services::test_services(dir.path()).attachments);
        let png = ctx
            .admit(
                Some("image/png".into()),
                Some("a.png".into()),
                "iVBORw0KGgo=".into(),
            )
            .unwrap();
        assert!(png.unwrap().starts_with("a2a-edge://attachments/"));
        let refused = ctx
            .admit(Some("text/html".into()), None, "PGI+".into())
            .unwrap()
            .unwrap_err();
        assert!(refused.contains("text/html"), "{refused}");
    }
}
