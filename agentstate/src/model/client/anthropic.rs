//! Anthropic Messages.

use super::{common_builder_methods, json_body, Core, Settings};
use crate::model::{ChatModel, ModelError, ModelStream};
use crate::providers::stream::AnthropicStream;
use crate::providers::{Conversation, ModelRequest};
use serde_json::json;
use std::sync::Arc;

/// The `anthropic-version` header sent by default.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Anthropic Messages (`POST {base}/messages`, base `https://api.anthropic.com/v1`).
///
/// Each call sends the [`ModelRequest::to_anthropic`] body with `stream: true`, the key in
/// `x-api-key` (`ANTHROPIC_API_KEY` by default) and `anthropic-version`
/// ([`ANTHROPIC_VERSION`]), and reads the answer with [`AnthropicStream`], which maps tool
/// call ids rewritten for Anthropic back to the conversation's. Anthropic requires
/// `max_output_tokens`: a request without it fails with a [`ModelError::Request`].
///
/// ```
/// use agentstate::model::Anthropic;
///
/// let client = Anthropic::builder()
///     .api_key("sk-ant-...")
///     .header("anthropic-beta", "prompt-caching-2024-07-31")
///     .build()?;
/// # Ok::<(), agentstate::model::ModelError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Anthropic {
    core: Arc<Core>,
    url: String,
}

/// Builds an [`Anthropic`] client; [`build`](AnthropicBuilder::build) checks it.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct AnthropicBuilder {
    settings: Settings,
    version: String,
}

impl Anthropic {
    /// A builder for Anthropic's API (key from `ANTHROPIC_API_KEY`).
    pub fn builder() -> AnthropicBuilder {
        AnthropicBuilder {
            settings: Settings::new(
                "Anthropic",
                "https://api.anthropic.com/v1",
                &["ANTHROPIC_API_KEY"],
                "x-api-key",
            ),
            version: ANTHROPIC_VERSION.to_owned(),
        }
    }
}

impl AnthropicBuilder {
    common_builder_methods!();

    /// The `anthropic-version` header (default [`ANTHROPIC_VERSION`]).
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// The client; an error when no API key is found (and [`no_key`](Self::no_key) was not
    /// called), or the base URL or a header is invalid.
    pub fn build(mut self) -> Result<Anthropic, ModelError> {
        // Headers given with `header` come after, and so win.
        self.settings
            .headers
            .insert(0, ("anthropic-version".to_owned(), self.version));
        let core = self.settings.build()?;
        let url = format!("{}/messages", core.base);
        Ok(Anthropic {
            core: Arc::new(core),
            url,
        })
    }
}

impl ChatModel for Anthropic {
    fn stream(&self, request: &ModelRequest, conversation: Conversation<'_>) -> ModelStream {
        let (body, ids) = match request.to_anthropic(conversation) {
            Ok(converted) => (Ok(converted.request), Some(converted.tool_ids)),
            Err(error) => (Err(error), None),
        };
        let body = json_body(body, self.core.provider, &[("stream", json!(true))], &[]);
        let ids = ids.filter(|ids| !ids.is_empty());
        self.core
            .stream(self.url.clone(), body, AnthropicStream::new(ids))
    }
}
