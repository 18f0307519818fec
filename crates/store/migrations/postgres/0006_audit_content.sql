-- toolgate store, PostgreSQL schema version 6: digests of the content blocks (images, audio,
-- resources, text) a call returned beside its data, as a JSON array of {type, mimeType, uri,
-- bytes, sha256}. NULL when there were none, and for every entry written before; the entry hash
-- covers the column only when it is set, so existing chains keep verifying.
ALTER TABLE audit_log ADD COLUMN content_json TEXT;
