//! Rich content a tool can return beside its JSON data: text, images, audio, embedded resources
//! and resource links, with their annotations and `_meta`, in the shape MCP clients read
//! (`{"type": "image", "data": …, "mimeType": …, "annotations": {"audience": ["user"]}}`).

use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Extra information a content block carries for clients (MCP's `_meta`), a JSON object.
pub type ContentMeta = Map<String, Value>;

/// One content block of a result. Binary payloads are base64 text, as on the MCP wire. Every
/// block may carry [`Annotations`] and `_meta`; both are left out of its JSON when absent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum Content {
    /// Plain text.
    Text {
        /// The text.
        text: String,
        /// How clients should use the block.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        annotations: Option<Annotations>,
        /// Extra information for clients.
        #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
        meta: Option<ContentMeta>,
    },
    /// An image.
    Image {
        /// Base64-encoded bytes.
        data: String,
        /// Its MIME type, like `image/png`.
        mime_type: String,
        /// How clients should use the block.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        annotations: Option<Annotations>,
        /// Extra information for clients.
        #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
        meta: Option<ContentMeta>,
    },
    /// A sound.
    Audio {
        /// Base64-encoded bytes.
        data: String,
        /// Its MIME type, like `audio/wav`.
        mime_type: String,
        /// How clients should use the block.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        annotations: Option<Annotations>,
        /// Extra information for clients.
        #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
        meta: Option<ContentMeta>,
    },
    /// A resource embedded in the result, with its text or its base64 `blob`.
    Resource {
        /// The resource.
        resource: EmbeddedResource,
        /// How clients should use the block.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        annotations: Option<Annotations>,
        /// Extra information for clients.
        #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
        meta: Option<ContentMeta>,
    },
    /// A link to a resource the client may read (MCP's `resource_link`), not its content.
    ResourceLink {
        /// The resource's URI.
        uri: String,
        /// Its programmatic name.
        name: String,
        /// Its title for people.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// What it holds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        /// Its MIME type, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// Its size in bytes (before any base64), when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size: Option<u64>,
        /// Icons a client may show for it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        icons: Option<Vec<Icon>>,
        /// How clients should use the block.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        annotations: Option<Annotations>,
        /// Extra information for clients.
        #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
        meta: Option<ContentMeta>,
    },
}

/// The resource inside [`Content::Resource`]: exactly one of `text` and `blob` is set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EmbeddedResource {
    /// The resource's URI.
    pub uri: String,
    /// Its MIME type, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Its content as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Its content as base64 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
    /// Extra information about the resource's contents, for clients.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ContentMeta>,
}

/// How clients should use a content block (MCP's `Annotations`): who it is for, how important
/// it is, when it last changed. Hints only: toolgate neither enforces nor trusts them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Annotations {
    /// Who the block is meant for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<Vec<Role>>,
    /// How important the block is, from 0 (least) to 1 (most).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Priority>,
    /// When the content last changed, as an ISO 8601 timestamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
}

/// Who a content block is meant for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The person using the client.
    User,
    /// The model.
    Assistant,
}

/// A content block's importance, a number from 0 (least important) to 1 (most).
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Priority(f64);

/// A [`Priority`] outside 0..=1 (or not a number).
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
#[error(
    "content annotation priority {0} is outside 0..=1: use a number from 0 (least important) to 1 (most important)"
)]
pub struct PriorityOutOfRange(pub f64);

impl Priority {
    /// `value` as a priority, if it is within 0..=1.
    pub fn new(value: f64) -> Result<Self, PriorityOutOfRange> {
        if (0.0..=1.0).contains(&value) {
            Ok(Self(value))
        } else {
            Err(PriorityOutOfRange(value))
        }
    }

    /// The number.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl TryFrom<f64> for Priority {
    type Error = PriorityOutOfRange;

    fn try_from(value: f64) -> Result<Self, Self::Error> {
        Self::new(value)
    }
}

impl From<Priority> for f64 {
    fn from(priority: Priority) -> Self {
        priority.0
    }
}

/// An icon a client may show for a resource link (MCP's `Icon`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Icon {
    /// Its URI: an `https:` URL or a `data:` URI.
    pub src: String,
    /// Its MIME type, when the URI does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Sizes it fits, like `48x48` or `any`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<Vec<String>>,
    /// The background it is drawn for: `light` or `dark`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theme: Option<IconTheme>,
}

/// The background an [`Icon`] is drawn for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IconTheme {
    /// A light background.
    Light,
    /// A dark background.
    Dark,
}

impl Content {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text {
            text: text.into(),
            annotations: None,
            meta: None,
        }
    }

    /// An image block from base64 data.
    pub fn image(base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Self::Image {
            data: base64.into(),
            mime_type: mime_type.into(),
            annotations: None,
            meta: None,
        }
    }

    /// An audio block from base64 data.
    pub fn audio(base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Self::Audio {
            data: base64.into(),
            mime_type: mime_type.into(),
            annotations: None,
            meta: None,
        }
    }

    /// An embedded text resource.
    pub fn resource_text(
        uri: impl Into<String>,
        mime_type: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        Self::resource(EmbeddedResource {
            uri: uri.into(),
            mime_type: Some(mime_type.into()),
            text: Some(text.into()),
            blob: None,
            meta: None,
        })
    }

    /// An embedded resource block.
    pub fn resource(resource: EmbeddedResource) -> Self {
        Self::Resource {
            resource,
            annotations: None,
            meta: None,
        }
    }

    /// A link to the resource at `uri` named `name` (set the optional fields on the variant).
    pub fn resource_link(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Self::ResourceLink {
            uri: uri.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
            size: None,
            icons: None,
            annotations: None,
            meta: None,
        }
    }

    /// The block with `annotations` (replacing any).
    #[must_use]
    pub fn with_annotations(mut self, annotations: Annotations) -> Self {
        *self.annotations_mut() = Some(annotations);
        self
    }

    /// The block with `_meta` (replacing any).
    #[must_use]
    pub fn with_meta(mut self, meta: ContentMeta) -> Self {
        *self.meta_mut() = Some(meta);
        self
    }

    /// The block's annotations.
    pub fn annotations(&self) -> Option<&Annotations> {
        match self {
            Self::Text { annotations, .. }
            | Self::Image { annotations, .. }
            | Self::Audio { annotations, .. }
            | Self::Resource { annotations, .. }
            | Self::ResourceLink { annotations, .. } => annotations.as_ref(),
        }
    }

    /// The block's `_meta`.
    pub fn meta(&self) -> Option<&ContentMeta> {
        match self {
            Self::Text { meta, .. }
            | Self::Image { meta, .. }
            | Self::Audio { meta, .. }
            | Self::Resource { meta, .. }
            | Self::ResourceLink { meta, .. } => meta.as_ref(),
        }
    }

    fn annotations_mut(&mut self) -> &mut Option<Annotations> {
        match self {
            Self::Text { annotations, .. }
            | Self::Image { annotations, .. }
            | Self::Audio { annotations, .. }
            | Self::Resource { annotations, .. }
            | Self::ResourceLink { annotations, .. } => annotations,
        }
    }

    fn meta_mut(&mut self) -> &mut Option<ContentMeta> {
        match self {
            Self::Text { meta, .. }
            | Self::Image { meta, .. }
            | Self::Audio { meta, .. }
            | Self::Resource { meta, .. }
            | Self::ResourceLink { meta, .. } => meta,
        }
    }

    /// Bytes this block adds to a result, for output limits: its payload (text, base64 data, a
    /// resource's text or blob, a link's text fields) plus its annotations' and `_meta`'s
    /// compact JSON, so that nothing a block carries escapes the limit.
    pub fn payload_len(&self) -> usize {
        let payload = match self {
            Self::Text { text, .. } => text.len(),
            Self::Image { data, .. } | Self::Audio { data, .. } => data.len(),
            Self::Resource { resource, .. } => {
                resource.text.as_ref().map_or(0, String::len)
                    + resource.blob.as_ref().map_or(0, String::len)
                    + resource.meta.as_ref().map_or(0, json_len)
            }
            Self::ResourceLink {
                uri,
                name,
                title,
                description,
                mime_type,
                icons,
                ..
            } => {
                uri.len()
                    + name.len()
                    + [title, description, mime_type]
                        .into_iter()
                        .map(|s| s.as_ref().map_or(0, String::len))
                        .sum::<usize>()
                    + icons.as_ref().map_or(0, json_len)
            }
        };
        payload + self.annotations().map_or(0, json_len) + self.meta().map_or(0, json_len)
    }
}

/// The length of `value` as compact JSON (0 if it cannot be written).
fn json_len<T: Serialize + ?Sized>(value: &T) -> usize {
    serde_json::to_vec(value).map_or(0, |v| v.len())
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn round_trip(wire: Value) -> Content {
        let block: Content = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(serde_json::to_value(&block).unwrap(), wire);
        block
    }

    #[test]
    fn blocks_without_annotations_keep_their_shape() {
        assert_eq!(
            serde_json::to_value(Content::image("AA==", "image/png")).unwrap(),
            json!({"type": "image", "data": "AA==", "mimeType": "image/png"})
        );
        assert_eq!(
            serde_json::to_value(Content::resource_text("a://b", "text/plain", "x")).unwrap(),
            json!({"type": "resource", "resource": {"uri": "a://b", "mimeType": "text/plain", "text": "x"}})
        );
    }

    #[test]
    fn annotations_meta_and_links_have_mcps_shape() {
        let text = round_trip(json!({
            "type": "text", "text": "hi",
            "annotations": {"audience": ["user", "assistant"], "priority": 0.7, "lastModified": "2025-01-12T15:00:58Z"},
            "_meta": {"x": 1}
        }));
        assert_eq!(
            text.annotations().unwrap().audience,
            Some(vec![Role::User, Role::Assistant])
        );
        round_trip(json!({
            "type": "resource",
            "resource": {"uri": "a://b", "blob": "AAEC", "_meta": {"inner": true}},
            "_meta": {"outer": true}
        }));
        let link = round_trip(json!({
            "type": "resource_link", "uri": "file:///a.txt", "name": "a.txt", "title": "A",
            "description": "A file", "mimeType": "text/plain", "size": 12,
            "icons": [{"src": "https://example.com/i.png", "mimeType": "image/png", "sizes": ["48x48"], "theme": "dark"}],
            "annotations": {"priority": 1.0}, "_meta": {"k": "v"}
        }));
        assert!(matches!(link, Content::ResourceLink { size: Some(12), .. }));
    }

    #[test]
    fn bad_annotations_are_refused_with_the_fix() {
        for wire in [
            json!({"type": "text", "text": "x", "annotations": {"priority": 1.5}}),
            json!({"type": "text", "text": "x", "annotations": {"audience": ["robot"]}}),
            json!({"type": "text", "text": "x", "annotations": {"lastModifed": "typo"}}),
            json!({"type": "text", "text": "x", "_meta": "not an object"}),
            json!({"type": "resource_link", "uri": "a://b"}),
        ] {
            assert!(
                serde_json::from_value::<Content>(wire.clone()).is_err(),
                "{wire}"
            );
        }
        let e = serde_json::from_value::<Content>(
            json!({"type": "text", "text": "x", "annotations": {"priority": 2}}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("outside 0..=1"), "{e}");
    }

    #[test]
    fn annotations_meta_and_links_count_toward_the_output_limit() {
        let plain = Content::text("abcd");
        assert_eq!(plain.payload_len(), 4);
        let annotated = plain.clone().with_annotations(Annotations {
            priority: Some(Priority::new(0.5).unwrap()),
            ..Annotations::default()
        });
        assert_eq!(annotated.payload_len(), 4 + r#"{"priority":0.5}"#.len());
        let mut meta = ContentMeta::new();
        meta.insert("k".into(), json!("v"));
        assert_eq!(
            plain.with_meta(meta).payload_len(),
            4 + r#"{"k":"v"}"#.len()
        );
        assert_eq!(Content::resource_link("a://b", "b").payload_len(), 6);
    }
}
