//! OpenAI Chat Completions and Responses (and OpenAI-compatible servers, Azure OpenAI).

use super::{common_builder_methods, json_body, Core, Settings};
use crate::model::{ChatModel, ModelError, ModelStream};
use crate::providers::stream::{OpenAiChatStream, OpenAiResponsesStream};
use crate::providers::{Conversation, ModelRequest};
use serde_json::json;
use std::sync::Arc;

const OPENAI_BASE: &str = "https://api.openai.com/v1";
const OPENAI_ENV: &[&str] = &["OPENAI_API_KEY"];
const AZURE_ENV: &[&str] = &["AZURE_OPENAI_API_KEY"];

/// OpenAI Chat Completions (`POST {base}/chat/completions`), or any server that speaks it:
/// vLLM, Ollama, LM Studio, OpenRouter (set [`base_url`](OpenAiChatBuilder::base_url)), and
/// Azure OpenAI ([`OpenAiChat::azure`]).
///
/// Each call sends the [`ModelRequest::to_openai_chat`] body with `stream: true` and
/// `stream_options.include_usage`, and reads the answer with
/// [`OpenAiChatStream`]; [`complete`](ChatModel::complete) streams too (see the
/// [module](crate::model) on why). The key is a bearer token, `OPENAI_API_KEY` by default.
///
/// ```
/// use agentstate::model::OpenAiChat;
///
/// // A local Ollama server, which needs no key.
/// let ollama = OpenAiChat::builder().base_url("http://localhost:11434/v1").no_key().build()?;
/// // OpenAI itself, with the key given here rather than read from OPENAI_API_KEY.
/// let openai = OpenAiChat::builder().api_key("sk-...").header("OpenAI-Project", "proj_1").build()?;
/// # Ok::<(), agentstate::model::ModelError>(())
/// ```
#[derive(Debug, Clone)]
pub struct OpenAiChat {
    core: Arc<Core>,
    url: String,
}

/// Builds an [`OpenAiChat`]; [`build`](OpenAiChatBuilder::build) checks it.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct OpenAiChatBuilder {
    settings: Settings,
    /// Azure's `deployment` and `api-version`.
    azure: Option<(String, String)>,
}

impl OpenAiChat {
    /// A builder for OpenAI's API (`https://api.openai.com/v1`, key from `OPENAI_API_KEY`).
    pub fn builder() -> OpenAiChatBuilder {
        OpenAiChatBuilder {
            settings: Settings::new("OpenAI Chat", OPENAI_BASE, OPENAI_ENV, "authorization"),
            azure: None,
        }
    }

    /// A builder for an Azure OpenAI deployment: `POST {endpoint}/openai/deployments/{deployment}/chat/completions?api-version={api_version}`
    /// with the key in the `api-key` header, from `AZURE_OPENAI_API_KEY` by default.
    ///
    /// ```
    /// use agentstate::model::OpenAiChat;
    ///
    /// let azure = OpenAiChat::azure("https://my-resource.openai.azure.com", "gpt-4o", "2024-10-21")
    ///     .api_key("...")
    ///     .build()?;
    /// # Ok::<(), agentstate::model::ModelError>(())
    /// ```
    pub fn azure(
        endpoint: impl Into<String>,
        deployment: impl Into<String>,
        api_version: impl Into<String>,
    ) -> OpenAiChatBuilder {
        let endpoint = endpoint.into();
        OpenAiChatBuilder {
            settings: Settings::new("Azure OpenAI Chat", &endpoint, AZURE_ENV, "api-key"),
            azure: Some((deployment.into(), api_version.into())),
        }
    }
}

impl OpenAiChatBuilder {
    common_builder_methods!();

    /// The client; an error when no API key is found (and [`no_key`](Self::no_key) was not
    /// called), or the base URL or a header is invalid.
    pub fn build(self) -> Result<OpenAiChat, ModelError> {
        let core = self.settings.build()?;
        let url = match &self.azure {
            Some((deployment, version)) => format!(
                "{}/openai/deployments/{deployment}/chat/completions?api-version={version}",
                core.base
            ),
            None => format!("{}/chat/completions", core.base),
        };
        Ok(OpenAiChat {
            core: Arc::new(core),
            url,
        })
    }
}

impl ChatModel for OpenAiChat {
    fn stream(&self, request: &ModelRequest, conversation: Conversation<'_>) -> ModelStream {
        let body = json_body(
            request.to_openai_chat(conversation).map(|c| c.request),
            self.core.provider,
            &[
                ("stream", json!(true)),
                ("stream_options", json!({"include_usage": true})),
            ],
            &[],
        );
        self.core
            .stream(self.url.clone(), body, OpenAiChatStream::new())
    }
}

/// OpenAI Responses (`POST {base}/responses`), on OpenAI, a compatible server or Azure
/// OpenAI ([`OpenAiResponses::azure`]).
///
/// Each call sends the [`ModelRequest::to_openai_responses`] body with `stream: true` and
/// reads the answer with [`OpenAiResponsesStream`]. The key is a bearer token,
/// `OPENAI_API_KEY` by default.
///
/// ```
/// use agentstate::model::OpenAiResponses;
///
/// let client = OpenAiResponses::builder().api_key("sk-...").build()?;
/// # Ok::<(), agentstate::model::ModelError>(())
/// ```
#[derive(Debug, Clone)]
pub struct OpenAiResponses {
    core: Arc<Core>,
    url: String,
}

/// Builds an [`OpenAiResponses`]; [`build`](OpenAiResponsesBuilder::build) checks it.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct OpenAiResponsesBuilder {
    settings: Settings,
}

impl OpenAiResponses {
    /// A builder for OpenAI's API (`https://api.openai.com/v1`, key from `OPENAI_API_KEY`).
    pub fn builder() -> OpenAiResponsesBuilder {
        OpenAiResponsesBuilder {
            settings: Settings::new("OpenAI Responses", OPENAI_BASE, OPENAI_ENV, "authorization"),
        }
    }

    /// A builder for Azure OpenAI's v1 API: `POST {endpoint}/openai/v1/responses`, the
    /// deployment's name as the request's model, the key in the `api-key` header (from
    /// `AZURE_OPENAI_API_KEY` by default).
    pub fn azure(endpoint: impl Into<String>) -> OpenAiResponsesBuilder {
        let endpoint = endpoint.into();
        let base = format!("{}/openai/v1", endpoint.trim_end_matches('/'));
        OpenAiResponsesBuilder {
            settings: Settings::new("Azure OpenAI Responses", &base, AZURE_ENV, "api-key"),
        }
    }
}

impl OpenAiResponsesBuilder {
    common_builder_methods!();

    /// The client; an error when no API key is found (and [`no_key`](Self::no_key) was not
    /// called), or the base URL or a header is invalid.
    pub fn build(self) -> Result<OpenAiResponses, ModelError> {
        let core = self.settings.build()?;
        let url = format!("{}/responses", core.base);
        Ok(OpenAiResponses {
            core: Arc::new(core),
            url,
        })
    }
}

impl ChatModel for OpenAiResponses {
    fn stream(&self, request: &ModelRequest, conversation: Conversation<'_>) -> ModelStream {
        let body = json_body(
            request.to_openai_responses(conversation).map(|c| c.request),
            self.core.provider,
            &[("stream", json!(true))],
            &[],
        );
        self.core
            .stream(self.url.clone(), body, OpenAiResponsesStream::new())
    }
}
