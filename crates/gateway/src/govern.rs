//! Governance of upstream tools: the entry's defaults, per-tool overrides and how far upstream annotations are trusted.
