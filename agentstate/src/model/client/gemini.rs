//! Google Gemini.

use super::{common_builder_methods, json_body, Core, Settings};
use crate::model::{ChatModel, ModelError, ModelStream};
use crate::providers::stream::GeminiStream;
use crate::providers::{Conversation, ModelRequest, RequestError};
use std::sync::Arc;

/// Google Gemini (`POST {base}/models/{model}:streamGenerateContent?alt=sse`, base
/// `https://generativelanguage.googleapis.com/v1beta`).
///
/// Each call sends the [`ModelRequest::to_gemini`] body (without `model`, which is the URL's)
/// with the key in `x-goog-api-key` (`GEMINI_API_KEY`, else `GOOGLE_API_KEY`, by default),
/// and reads the answer with [`GeminiStream`].
///
/// ```
/// use agentstate::model::Gemini;
///
/// let client = Gemini::builder().api_key("AIza...").build()?;
/// # Ok::<(), agentstate::model::ModelError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Gemini {
    core: Arc<Core>,
}

/// Builds a [`Gemini`] client; [`build`](GeminiBuilder::build) checks it.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct GeminiBuilder {
    settings: Settings,
}

impl Gemini {
    /// A builder for the Gemini API (key from `GEMINI_API_KEY`, then `GOOGLE_API_KEY`).
    pub fn builder() -> GeminiBuilder {
        GeminiBuilder {
            settings: Settings::new(
                "Gemini",
                "https://generativelanguage.googleapis.com/v1beta",
                &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
                "x-goog-api-key",
            ),
        }
    }
}

impl GeminiBuilder {
    common_builder_methods!();

    /// The client; an error when no API key is found (and [`no_key`](Self::no_key) was not
    /// called), or the base URL or a header is invalid.
    pub fn build(self) -> Result<Gemini, ModelError> {
        Ok(Gemini {
            core: Arc::new(self.settings.build()?),
        })
    }
}

impl ChatModel for Gemini {
    fn stream(&self, request: &ModelRequest, conversation: Conversation<'_>) -> ModelStream {
        let model = request.model();
        let model = model.strip_prefix("models/").unwrap_or(model);
        let url = format!(
            "{}/models/{model}:streamGenerateContent?alt=sse",
            self.core.base
        );
        let body = if model.is_empty()
            || !model
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._/@".contains(&b))
        {
            Err(ModelError::Request(RequestError::Invalid {
                provider: Some("Gemini"),
                parameter: "model".to_owned(),
                reason: format!(
                    "`{model}` cannot go in the URL (letters, digits and `-._/@` only)"
                ),
            }))
        } else {
            json_body(
                request.to_gemini(conversation).map(|c| c.request),
                self.core.provider,
                &[],
                &["model"],
            )
        };
        self.core.stream(url, body, GeminiStream::new())
    }
}
