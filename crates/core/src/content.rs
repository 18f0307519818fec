//! Rich content a tool can return beside its JSON data: text, images, audio and embedded
//! resources, in the shape MCP clients read (`{"type": "image", "data": …, "mimeType": …}`).

use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};

/// One content block of a result. Binary payloads are base64 text, as on the MCP wire.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Content {
    Text {
        text: String,
    },
    Image {
        /// Base64-encoded bytes.
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    Audio {
        /// Base64-encoded bytes.
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// A resource embedded in the result, with its text or its base64 `blob`.
    Resource {
        resource: EmbeddedResource,
    },
}

/// The resource inside [`Content::Resource`]: exactly one of `text` and `blob` is set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EmbeddedResource {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

impl Content {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// An image block from base64 data.
    pub fn image(base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Self::Image {
            data: base64.into(),
            mime_type: mime_type.into(),
        }
    }

    /// An audio block from base64 data.
    pub fn audio(base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Self::Audio {
            data: base64.into(),
            mime_type: mime_type.into(),
        }
    }

    /// An embedded text resource.
    pub fn resource_text(
        uri: impl Into<String>,
        mime_type: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        Self::Resource {
            resource: EmbeddedResource {
                uri: uri.into(),
                mime_type: Some(mime_type.into()),
                text: Some(text.into()),
                blob: None,
            },
        }
    }

    /// Bytes this block adds to a result (its payload), for output limits.
    pub fn payload_len(&self) -> usize {
        match self {
            Self::Text { text } => text.len(),
            Self::Image { data, .. } | Self::Audio { data, .. } => data.len(),
            Self::Resource { resource } => {
                resource.text.as_ref().map_or(0, String::len)
                    + resource.blob.as_ref().map_or(0, String::len)
            }
        }
    }
}

/// Content attached by the current attempt of a call; shared between the context and the call.
#[derive(Clone, Debug, Default)]
pub(crate) struct Attachments(Arc<Mutex<Vec<Content>>>);

impl Attachments {
    pub(crate) fn push(&self, content: Content) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(content);
    }

    pub(crate) fn take(&self) -> Vec<Content> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Replaces the blocks attached so far (with those the output limit kept).
    pub(crate) fn set(&self, content: Vec<Content>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = content;
    }
}
