//! `a2a:edge/attachments`: admission and content-addressed storage of `raw` parts.

use super::EdgeView;
use super::bindings::attachments::Host;

impl Host for EdgeView<'_> {
    fn admit(&mut self, media_type: Option<String>, filename: Option<String>, base64: String) -> wasmtime::Result<Result<String, String>> {
        Ok(self.req.app.attachments.admit(media_type.as_deref(), filename.as_deref(), &base64))
    }
}
