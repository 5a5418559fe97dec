//! `a2a:edge/push`, scoped to the request's instance: configs of this instance's tasks only,
//! every webhook judged by the egress guard before it is stored.

use std::sync::Arc;

use a2a_protocol::push::TaskPushNotificationConfig;

use super::bindings::push::Host;
use super::bindings::types::StoreError;
use super::owner::Owner;
use super::services::{Invocation, Services};
use crate::push::Webhooks;
use crate::store::{self, PushOutbox};

/// The push capability of one request.
pub struct PushCtx {
    /// The push configs.
    store: Arc<dyn PushOutbox>,
    /// The tasks the request reaches (a config is kept only for one of them).
    owner: Owner,
    /// The webhook guard.
    webhooks: Arc<Webhooks>,
    /// The instance every call is scoped to.
    instance_id: String,
}

impl PushCtx {
    /// The capability of `call`, scoped to its instance.
    pub fn prepare(s: &Services, call: &Invocation) -> PushCtx {
        PushCtx {
            store: s.store.clone(),
            owner: Owner::of(s, call),
            webhooks: s.webhooks.clone(),
            instance_id: call.instance.record.id.clone(),
        }
    }

    /// The task's configs; `NotFound` when the request does not reach the task.
    async fn configs(&self, task_id: String) -> Result<Vec<store::PushConfig>, StoreError> {
        self.owner.owns(&task_id).await?;
        Ok(self
            .store
            .push_configs(self.instance_id.clone(), task_id)
            .await?)
    }
}

/// A config the component sends, as the store keeps it (its webhook judged by the guard).
pub async fn admitted(
    webhooks: &Webhooks,
    instance_id: &str,
    json: &str,
) -> Result<store::PushConfig, StoreError> {
    let config: TaskPushNotificationConfig = serde_json::from_str(json)
        .map_err(|e| StoreError::Invalid(format!("the push config is not valid: {e}")))?;
    let task_id = config.task_id.clone();
    let config = config
        .checked(&task_id)
        .map_err(|e| StoreError::Invalid(e.message))?;
    webhooks
        .admit(&config.url)
        .await
        .map_err(StoreError::Invalid)?;
    Ok(store::PushConfig {
        instance_id: instance_id.to_owned(),
        task_id: config.task_id.clone(),
        id: config.id.clone(),
        body: serde_json::to_string(&config).unwrap_or_default(),
    })
}

impl Host for PushCtx {
    async fn set_config(&mut self, config: String) -> wasmtime::Result<Result<(), StoreError>> {
        let config = match admitted(&self.webhooks, &self.instance_id, &config).await {
            Ok(c) => c,
            Err(e) => return Ok(Err(e)),
        };
        if let Err(e) = self.owner.owns(&config.task_id).await {
            return Ok(Err(e));
        }
        Ok(self.store.put_push_config(config).await.map_err(Into::into))
    }

    async fn get_config(
        &mut self,
        task_id: String,
        id: String,
    ) -> wasmtime::Result<Result<String, StoreError>> {
        Ok(self.configs(task_id).await.and_then(|all| {
            all.into_iter()
                .find(|c| c.id == id)
                .map(|c| c.body)
                .ok_or(StoreError::NotFound)
        }))
    }

    async fn list_configs(
        &mut self,
        task_id: String,
    ) -> wasmtime::Result<Result<Vec<String>, StoreError>> {
        Ok(self
            .configs(task_id)
            .await
            .map(|all| all.into_iter().map(|c| c.body).collect()))
    }

    async fn delete_config(
        &mut self,
        task_id: String,
        id: String,
    ) -> wasmtime::Result<Result<(), StoreError>> {
        if let Err(e) = self.owner.owns(&task_id).await {
            return Ok(Err(e));
        }
        Ok(self
            .store
            .delete_push_config(self.instance_id.clone(), task_id, id)
            .await
            .map_err(Into::into))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use crate::store::memory::MemoryStore;

    fn ctx(store: Arc<dyn Store>, instance: &str, allow_private: bool) -> PushCtx {
        PushCtx {
            store: store.clone(),
            owner: Owner::new(store, instance, None),
            webhooks: Arc::new(Webhooks::new(
                allow_private,
                std::time::Duration::from_secs(2),
            )),
            instance_id: instance.into(),
        }
    }

    #[tokio::test]
    async fn configs_are_scoped_to_the_instance_and_guarded() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::default());
        store
            .create_task(crate::store::contract::row("t", 1), None, None)
            .await
            .unwrap();
        let (mut mine, mut theirs) = (ctx(store.clone(), "i", true), ctx(store.clone(), "j", true));
        let config = r#"{"taskId":"t","url":"http://127.0.0.1:9/hook","token":"tok"}"#;
        mine.set_config(config.into()).await.unwrap().unwrap();
        let stored = mine
            .get_config("t".into(), "t".into())
            .await
            .unwrap()
            .unwrap();
        assert!(
            stored.contains(r#""id":"t""#),
            "the id defaults to the task's: {stored}"
        );
        assert!(matches!(
            theirs.set_config(config.into()).await.unwrap(),
            Err(StoreError::NotFound)
        ));
        assert!(matches!(
            theirs.list_configs("t".into()).await.unwrap(),
            Err(StoreError::NotFound)
        ));
        assert!(matches!(
            theirs.delete_config("t".into(), "t".into()).await.unwrap(),
            Err(StoreError::NotFound)
        ));
        assert_eq!(
            mine.list_configs("t".into()).await.unwrap().unwrap().len(),
            1
        );
        let mut guarded = ctx(store.clone(), "i", false);
        match guarded.set_config(config.into()).await.unwrap() {
            Err(StoreError::Invalid(why)) => assert!(why.contains("127.0.0.1"), "{why}"),
            other => panic!("{other:?}"),
        }
        mine.delete_config("t".into(), "t".into())
            .await
            .unwrap()
            .unwrap();
        mine.delete_config("t".into(), "t".into())
            .await
            .unwrap()
            .unwrap();
        assert!(matches!(
            mine.get_config("t".into(), "t".into()).await.unwrap(),
            Err(StoreError::NotFound)
        ));
    }
}
