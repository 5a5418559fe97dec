//! The outbound A2A client component: one instantiation per remote call. It reads the remote
//! card, sends the message (streaming over SSE when the card announces it, else sending and
//! polling GetTask), retries transport errors and 5xx, cancels the remote task when the caller
//! aborts, and answers the tool text. The host injects credentials and enforces timeouts and
//! size limits on every request; this component never sees a secret.

mod call;
mod net;

use a2a_guest::client::exports::a2a::edge::client::{CallError, CallRequest, Guest};

struct Component;

impl Guest for Component {
    fn discover() -> Result<String, CallError> {
        let ctx = net::Ctx::new();
        let card = call::card(&ctx)?;
        a2a_protocol::client::endpoint(&card).map_err(CallError::InvalidResponse)?;
        Ok(card.to_string())
    }

    fn call(req: CallRequest) -> Result<String, CallError> {
        call::run(&net::Ctx::new(), req)
    }
}

a2a_guest::client::export_client!(Component);
