//! Snapshots of every export format (and the strict OpenAI and Anthropic variants) for the fixture
//! tools:
//! what providers and people read is reviewed as a whole.
#![cfg(test)]

mod common;

use serde_json::Value;
use toolgate_export::{ExportFormat, ExportOptions, GOVERNANCE_META_KEY, export};

/// Definition hashes follow core's canonical form; they are checked in rules.rs, not here.
fn redact_hashes(document: &mut Value) {
    for tool in document["tools"].as_array_mut().unwrap() {
        let hash = &mut tool["_meta"][GOVERNANCE_META_KEY]["definitionHash"];
        let text = hash.as_str().unwrap();
        assert!(
            text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()),
            "{text}"
        );
        *hash = Value::String("[sha-256 of the definition]".into());
    }
}

#[test]
fn every_format_matches_its_snapshot() {
    let specs = common::fixtures();
    let cases = ExportFormat::ALL.into_iter().map(|f| (f, false)).chain([
        (ExportFormat::OpenAi, true),
        (ExportFormat::OpenAiResponses, true),
        (ExportFormat::Anthropic, true),
    ]);
    for (format, strict) in cases {
        let options = ExportOptions {
            strict,
            ..ExportOptions::default()
        };
        let mut out = export(&specs, format, &options)
            .unwrap_or_else(|e| panic!("{format} strict={strict}: {e}"));
        if format == ExportFormat::Mcp {
            redact_hashes(&mut out.document);
        }
        let name = if strict {
            format!("{format}-strict")
        } else {
            format.to_string()
        };
        insta::assert_json_snapshot!(name, out);
    }
}
