//! `a2a:edge/attachments`: admission and content-addressed storage of `raw` parts.

use std::sync::Arc;

use super::bindings::attachments::Host;
use crate::attachments::Attachments;

/// The attachments capability.
pub struct AttachmentsCtx(pub Arc<Attachments>);

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
