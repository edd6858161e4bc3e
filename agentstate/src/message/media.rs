//! References to media and annotation sources: AgentFlow's `MediaRef` and `AnnotationRef`,
//! used by the multimodal and text [content blocks](super::ContentBlock).

use serde::{Deserialize, Serialize};

/// How a [`MediaRef`] points at its bytes: AgentFlow's `kind` field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MediaKind {
    /// An `http(s)` or `data:` URL in [`MediaRef::url`] (the default).
    #[default]
    Url,
    /// A provider-managed file id in [`MediaRef::file_id`].
    FileId,
    /// Inline base64 bytes in [`MediaRef::data_base64`].
    Data,
}

/// A reference to media content (image, audio, video, document or data), AgentFlow's
/// `MediaRef`. Every field but `kind` is optional and serialized as `null` when absent.
///
/// ```
/// use agentstate::message::{MediaKind, MediaRef};
///
/// let photo = MediaRef::url("https://example.com/cat.png").with_mime_type("image/png");
/// assert_eq!(photo.kind, MediaKind::Url);
/// let json = serde_json::to_value(&photo)?;
/// assert_eq!(json["mime_type"], "image/png");
/// assert!(json["file_id"].is_null());
///
/// // Every field has a default, even `kind`.
/// let parsed: MediaRef = serde_json::from_str(r#"{"file_id": "f-1"}"#)?;
/// assert_eq!(parsed.kind, MediaKind::Url);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MediaRef {
    /// How the media is referenced (default [`MediaKind::Url`]).
    #[serde(default)]
    pub kind: MediaKind,
    /// An `http(s)` or `data:` URL.
    pub url: Option<String>,
    /// A provider-managed file id.
    pub file_id: Option<String>,
    /// Base64-encoded bytes (small payloads only).
    pub data_base64: Option<String>,
    /// The MIME type, e.g. `image/png`.
    pub mime_type: Option<String>,
    /// The size in bytes.
    pub size_bytes: Option<i64>,
    /// The SHA-256 of the bytes.
    pub sha256: Option<String>,
    /// A file name.
    pub filename: Option<String>,
    /// Width in pixels (images, video).
    pub width: Option<i64>,
    /// Height in pixels (images, video).
    pub height: Option<i64>,
    /// Duration in milliseconds (audio, video).
    pub duration_ms: Option<i64>,
    /// A page number (documents).
    pub page: Option<i64>,
}

impl MediaRef {
    /// Media at a URL (`kind: "url"`).
    pub fn url(url: impl Into<String>) -> Self {
        MediaRef {
            kind: MediaKind::Url,
            url: Some(url.into()),
            ..MediaRef::default()
        }
    }

    /// Media stored by the provider under a file id (`kind: "file_id"`).
    pub fn file_id(file_id: impl Into<String>) -> Self {
        MediaRef {
            kind: MediaKind::FileId,
            file_id: Some(file_id.into()),
            ..MediaRef::default()
        }
    }

    /// Inline media: base64 bytes and their MIME type (`kind: "data"`).
    ///
    /// ```
    /// use agentstate::message::{MediaKind, MediaRef};
    ///
    /// let wav = MediaRef::data("UklGRg==", "audio/wav");
    /// assert_eq!(wav.kind, MediaKind::Data);
    /// assert_eq!(wav.mime_type.as_deref(), Some("audio/wav"));
    /// ```
    pub fn data(data_base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        MediaRef {
            kind: MediaKind::Data,
            data_base64: Some(data_base64.into()),
            mime_type: Some(mime_type.into()),
            ..MediaRef::default()
        }
    }

    /// Builder: the MIME type.
    pub fn with_mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }

    /// Builder: a file name.
    pub fn with_filename(mut self, filename: impl Into<String>) -> Self {
        self.filename = Some(filename.into());
        self
    }
}

/// A reference to the source of an annotation (a citation or a note), AgentFlow's
/// `AnnotationRef`. Every field is optional and serialized as `null` when absent.
///
/// ```
/// use agentstate::message::AnnotationRef;
///
/// let source = AnnotationRef::url("https://en.wikipedia.org/wiki/Paris").with_title("Paris");
/// assert_eq!(
///     serde_json::to_string(&source)?,
///     r#"{"url":"https://en.wikipedia.org/wiki/Paris","file_id":null,"page":null,"index":null,"title":"Paris"}"#
/// );
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct AnnotationRef {
    /// The source's URL.
    pub url: Option<String>,
    /// A provider-managed file id.
    pub file_id: Option<String>,
    /// A page number in the source.
    pub page: Option<i64>,
    /// An index within the source.
    pub index: Option<i64>,
    /// The source's title.
    pub title: Option<String>,
}

impl AnnotationRef {
    /// A source at a URL.
    pub fn url(url: impl Into<String>) -> Self {
        AnnotationRef {
            url: Some(url.into()),
            ..AnnotationRef::default()
        }
    }

    /// Builder: the title.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn media_ref_defaults_and_full_dump() {
        let media: MediaRef = serde_json::from_value(json!({})).unwrap();
        assert_eq!(media, MediaRef::default());
        assert_eq!(
            serde_json::to_value(&media).unwrap(),
            json!({
                "kind": "url", "url": null, "file_id": null, "data_base64": null,
                "mime_type": null, "size_bytes": null, "sha256": null, "filename": null,
                "width": null, "height": null, "duration_ms": null, "page": null
            })
        );
    }

    #[test]
    fn media_kinds_are_snake_case_and_closed() {
        for (kind, text) in [
            (MediaKind::Url, "url"),
            (MediaKind::FileId, "file_id"),
            (MediaKind::Data, "data"),
        ] {
            assert_eq!(serde_json::to_value(kind).unwrap(), json!(text));
        }
        let err = serde_json::from_value::<MediaRef>(json!({"kind": "blob"})).unwrap_err();
        assert!(err.to_string().contains("blob"), "{err}");
    }

    #[test]
    fn media_ref_rejects_wrong_types() {
        assert!(serde_json::from_value::<MediaRef>(json!({"width": "wide"})).is_err());
        assert!(serde_json::from_value::<MediaRef>(json!({"url": 3})).is_err());
    }

    #[test]
    fn constructors() {
        let m = MediaRef::file_id("file-9").with_filename("a.pdf");
        assert_eq!(m.kind, MediaKind::FileId);
        assert_eq!(m.file_id.as_deref(), Some("file-9"));
        assert_eq!(m.filename.as_deref(), Some("a.pdf"));
        assert_eq!(m.url, None);
    }

    #[test]
    fn annotation_ref_defaults() {
        let a: AnnotationRef = serde_json::from_value(json!({"index": 2})).unwrap();
        assert_eq!(a.index, Some(2));
        assert_eq!(a.url, None);
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            json!({"url": null, "file_id": null, "page": null, "index": 2, "title": null})
        );
    }
}
