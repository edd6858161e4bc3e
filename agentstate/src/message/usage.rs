//! Token accounting of a model response: AgentFlow's `TokenUsages`.

use serde::{Deserialize, Serialize};

/// Token usage of one model response, AgentFlow's `TokenUsages`.
///
/// The three totals are required; the detail counters default to 0. `image_tokens` and
/// `audio_tokens` may also be `null` (`None`), which differs from an absent field (0).
///
/// ```
/// use agentstate::message::TokenUsages;
///
/// let usage: TokenUsages = serde_json::from_str(
///     r#"{"completion_tokens": 12, "prompt_tokens": 100, "total_tokens": 112, "image_tokens": null}"#,
/// )?;
/// assert_eq!(usage.reasoning_tokens, 0);
/// assert_eq!(usage.image_tokens, None);
/// assert_eq!(usage.audio_tokens, Some(0));
/// assert_eq!(usage, TokenUsages { image_tokens: None, ..TokenUsages::new(12, 100) });
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TokenUsages {
    /// Tokens the model generated.
    pub completion_tokens: i64,
    /// Tokens of the prompt.
    pub prompt_tokens: i64,
    /// All tokens of the call.
    pub total_tokens: i64,
    /// Reasoning tokens (default 0).
    #[serde(default)]
    pub reasoning_tokens: i64,
    /// Tokens written to the provider's prompt cache (default 0).
    #[serde(default)]
    pub cache_creation_input_tokens: i64,
    /// Tokens read from the provider's prompt cache (default 0).
    #[serde(default)]
    pub cache_read_input_tokens: i64,
    /// Image tokens (default 0; `None` when the provider sent `null`).
    #[serde(default = "zero")]
    pub image_tokens: Option<i64>,
    /// Audio tokens (default 0; `None` when the provider sent `null`).
    #[serde(default = "zero")]
    pub audio_tokens: Option<i64>,
}

fn zero() -> Option<i64> {
    Some(0)
}

impl TokenUsages {
    /// Usage with these completion and prompt counts, `total_tokens` their sum and every
    /// detail counter at its default 0.
    pub fn new(completion_tokens: i64, prompt_tokens: i64) -> Self {
        TokenUsages {
            completion_tokens,
            prompt_tokens,
            total_tokens: completion_tokens.saturating_add(prompt_tokens),
            reasoning_tokens: 0,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 0,
            image_tokens: Some(0),
            audio_tokens: Some(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_field_order() {
        let usage: TokenUsages = serde_json::from_value(
            json!({"completion_tokens": 1, "prompt_tokens": 2, "total_tokens": 3}),
        )
        .unwrap();
        assert_eq!(usage, TokenUsages::new(1, 2));
        assert_eq!(
            serde_json::to_string(&usage).unwrap(),
            r#"{"completion_tokens":1,"prompt_tokens":2,"total_tokens":3,"reasoning_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"image_tokens":0,"audio_tokens":0}"#
        );
    }

    #[test]
    fn null_media_tokens_stay_null() {
        let usage: TokenUsages = serde_json::from_value(json!({
            "completion_tokens": 1, "prompt_tokens": 2, "total_tokens": 3,
            "image_tokens": null, "audio_tokens": 7
        }))
        .unwrap();
        assert_eq!(usage.image_tokens, None);
        assert_eq!(usage.audio_tokens, Some(7));
        let back = serde_json::to_value(usage).unwrap();
        assert_eq!(back["image_tokens"], json!(null));
    }

    #[test]
    fn totals_are_required_and_non_null() {
        let err = serde_json::from_value::<TokenUsages>(
            json!({"completion_tokens": 1, "prompt_tokens": 2}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("total_tokens"), "{err}");
        assert!(serde_json::from_value::<TokenUsages>(json!({
            "completion_tokens": 1, "prompt_tokens": 2, "total_tokens": 3, "reasoning_tokens": null
        }))
        .is_err());
    }
}
