//! A gRPC client of the server's A2A service: tonic with the official proto's stubs.

use a2a_pb::proto::a2a_service_client::A2aServiceClient;
use a2a_pb::proto::{self as pb, part};

/// Sends a text message with `message_id` to `tenant` at `base` over gRPC, with the bearer
/// `token` if any: the answer, or the status it ended with.
pub async fn send(
    base: &str,
    tenant: &str,
    message_id: &str,
    token: Option<&str>,
) -> Result<pb::SendMessageResponse, tonic::Status> {
    let mut client = A2aServiceClient::connect(base.to_owned())
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let mut request = tonic::Request::new(pb::SendMessageRequest {
        tenant: tenant.into(),
        message: Some(pb::Message {
            message_id: message_id.into(),
            role: pb::Role::User as i32,
            parts: vec![pb::Part {
                content: Some(part::Content::Text("hi".into())),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    });
    if let Some(t) = token {
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    client.send_message(request).await.map(|r| r.into_inner())
}
