//! What the agent talks to: a [`ModelSpec`] (`openai:NAME` or `anthropic:NAME`), the
//! [`BaseUrl`] of its API and the [`ApiKey`] read from the environment. Each is a validated
//! newtype; the key never prints (its `Debug` is redacted and nothing logs it).

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::error::AgentError;

/// The wire format a model speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// OpenAI Chat Completions (`POST {base}/chat/completions`), which vLLM, llama.cpp's server,
    /// Ollama and LiteLLM speak too.
    OpenAi,
    /// Anthropic Messages (`POST {base}/messages`).
    Anthropic,
}

impl Provider {
    /// The prefix of `--model` (`openai`, `anthropic`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
        }
    }

    /// The environment variable its key is read from.
    pub fn key_variable(self) -> &'static str {
        match self {
            Self::OpenAi => "OPENAI_API_KEY",
            Self::Anthropic => "ANTHROPIC_API_KEY",
        }
    }

    /// The provider's own API, used when no base URL is given.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Self::OpenAi => "https://api.openai.com/v1",
            Self::Anthropic => "https://api.anthropic.com/v1",
        }
    }

    /// The API's name as messages show it.
    pub fn api_name(self) -> &'static str {
        match self {
            Self::OpenAi => "OpenAI Chat Completions",
            Self::Anthropic => "Anthropic Messages",
        }
    }
}

/// `PROVIDER:NAME`, like `openai:gpt-4.1` or `anthropic:claude-sonnet-4-5`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ModelSpec {
    provider: Provider,
    name: String,
}

impl ModelSpec {
    /// The wire format.
    pub fn provider(&self) -> Provider {
        self.provider
    }

    /// The model's name as the API takes it.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl FromStr for ModelSpec {
    type Err = AgentError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        let bad = |reason: &str| AgentError::Model {
            value: raw.to_owned(),
            reason: reason.to_owned(),
        };
        let Some((prefix, name)) = raw.split_once(':') else {
            return Err(bad("it has no provider prefix"));
        };
        let provider = match prefix.trim().to_ascii_lowercase().as_str() {
            "openai" => Provider::OpenAi,
            "anthropic" => Provider::Anthropic,
            _ => return Err(bad("the provider must be `openai` or `anthropic`")),
        };
        let name = name.trim();
        if name.is_empty() {
            return Err(bad("the model name after the colon is empty"));
        }
        if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad(
                "the model name contains a space or a control character",
            ));
        }
        Ok(Self {
            provider,
            name: name.to_owned(),
        })
    }
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.provider.as_str(), self.name)
    }
}

impl Serialize for ModelSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The base URL of a model API: `http` or `https`, no credentials in it, no query or fragment.
/// Endpoints are joined to it (`{base}/chat/completions`, `{base}/messages`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BaseUrl(String);

impl BaseUrl {
    /// The provider's own API.
    pub fn default_for(provider: Provider) -> Self {
        Self(provider.default_base_url().to_owned())
    }

    /// `{base}/{path}`.
    pub fn join(&self, path: &str) -> String {
        format!("{}/{path}", self.0)
    }

    /// Whether the key would travel unencrypted to another machine: plain `http` to a host that
    /// is not loopback (`localhost`, `127.0.0.0/8`, `::1`). Allowed — a vLLM on the LAN is a fair
    /// choice — but worth a warning.
    pub fn is_plain_http_remote(&self) -> bool {
        let Ok(url) = reqwest::Url::parse(&self.0) else {
            return false;
        };
        if url.scheme() != "http" {
            return false;
        }
        let Some(host) = url.host_str() else {
            return false;
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        match host.parse::<std::net::IpAddr>() {
            Ok(ip) => !ip.is_loopback(),
            Err(_) => !host.eq_ignore_ascii_case("localhost"),
        }
    }

    /// The URL as given, without a trailing slash.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for BaseUrl {
    type Err = AgentError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        let bad = |reason: &str| AgentError::BaseUrl {
            value: raw.to_owned(),
            reason: reason.to_owned(),
        };
        let url = reqwest::Url::parse(raw.trim()).map_err(|e| bad(&e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad("the scheme must be http or https"));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(bad("it has no host"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            // The value is not repeated: it holds a secret.
            return Err(AgentError::BaseUrl {
                value: format!(
                    "{}://(credentials)@{}",
                    url.scheme(),
                    url.host_str().unwrap_or("")
                ),
                reason: "it carries credentials; put the key in OPENAI_API_KEY or \
                         ANTHROPIC_API_KEY instead"
                    .to_owned(),
            });
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(bad(
                "it has a query or a fragment; give the API's base, like http://127.0.0.1:11434/v1",
            ));
        }
        Ok(Self(url.as_str().trim_end_matches('/').to_owned()))
    }
}

impl fmt::Display for BaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An API key. Its `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// The key of `provider` from its environment variable, looked up with `lookup`
    /// (`std::env::var` in the CLI); an empty value counts as missing.
    ///
    /// # Errors
    ///
    /// [`AgentError::MissingKey`] naming the variable.
    pub fn from_env(
        provider: Provider,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, AgentError> {
        let variable = provider.key_variable();
        match lookup(variable) {
            Some(key) if !key.trim().is_empty() => Ok(Self(key.trim().to_owned())),
            _ => Err(AgentError::MissingKey { variable }),
        }
    }

    /// The key, to put in a request header (only there).
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(redacted)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_names_its_provider() {
        let m: ModelSpec = "openai:gpt-4.1".parse().unwrap();
        assert_eq!(m.provider(), Provider::OpenAi);
        assert_eq!(m.name(), "gpt-4.1");
        let m: ModelSpec = "anthropic:claude-sonnet-4-5".parse().unwrap();
        assert_eq!(m.to_string(), "anthropic:claude-sonnet-4-5");
        // Ollama's names carry a colon of their own.
        let m: ModelSpec = "openai:llama3.2:3b".parse().unwrap();
        assert_eq!(m.name(), "llama3.2:3b");
        for bad in ["gpt-4", "gemini:x", "openai:", "openai:a b"] {
            let e = bad.parse::<ModelSpec>().unwrap_err().to_string();
            assert!(e.contains("openai:NAME"), "{e}");
        }
    }

    #[test]
    fn a_base_url_is_http_without_credentials() {
        let u: BaseUrl = "http://127.0.0.1:11434/v1/".parse().unwrap();
        assert_eq!(
            u.join("chat/completions"),
            "http://127.0.0.1:11434/v1/chat/completions"
        );
        assert!("ftp://x/v1".parse::<BaseUrl>().is_err());
        assert!(!u.is_plain_http_remote());
        let lan: BaseUrl = "http://10.0.0.5:8000/v1".parse().unwrap();
        assert!(lan.is_plain_http_remote());
        let tls: BaseUrl = "https://10.0.0.5/v1".parse().unwrap();
        assert!(!tls.is_plain_http_remote());
        let local: BaseUrl = "http://localhost:11434/v1".parse().unwrap();
        assert!(!local.is_plain_http_remote());
        let e = "https://user:secret@api.example/v1"
            .parse::<BaseUrl>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("credentials") && !e.contains("secret"), "{e}");
    }

    #[test]
    fn a_missing_key_names_the_variable_and_a_key_never_prints() {
        let e = ApiKey::from_env(Provider::Anthropic, |_| None).unwrap_err();
        assert!(e.to_string().contains("ANTHROPIC_API_KEY"), "{e}");
        let e = ApiKey::from_env(Provider::OpenAi, |_| Some(" ".into())).unwrap_err();
        assert!(e.to_string().contains("OPENAI_API_KEY"), "{e}");
        let key = ApiKey::from_env(Provider::OpenAi, |_| Some("sk-secret".into())).unwrap();
        assert!(!format!("{key:?}").contains("sk-secret"));
    }
}
