-- The product database of the product_context example (seed 002's read tools), SQLite.
-- Loaded into a fresh database in a temp dir at startup. JSON lists are TEXT.

CREATE TABLE products (
    id   TEXT PRIMARY KEY,
    name TEXT NOT NULL
);

-- The baseline: what the product is, as a PM would state it. At most one per product.
CREATE TABLE product_baselines (
    product_id         TEXT PRIMARY KEY REFERENCES products (id),
    name               TEXT NOT NULL,
    type               TEXT NOT NULL,
    value_proposition  TEXT NOT NULL,
    primary_users_json TEXT NOT NULL,
    core_jobs_json     TEXT NOT NULL
);

-- Sources (repositories, docs, ...) classified for a product. signals_json: a JSON array of
-- paths or markers that justified the classification.
CREATE TABLE product_sources (
    product_id     TEXT NOT NULL REFERENCES products (id),
    source_id      TEXT NOT NULL,
    classification TEXT NOT NULL,
    signals_json   TEXT NOT NULL DEFAULT '[]',
    notes          TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (product_id, source_id)
);

-- Context runs of the agent; a run writes some of the four outputs.
CREATE TABLE context_runs (
    id          INTEGER PRIMARY KEY,
    product_id  TEXT NOT NULL REFERENCES products (id),
    status      TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    finished_at TEXT NULL
);

CREATE TABLE context_run_outputs (
    run_id     INTEGER NOT NULL REFERENCES context_runs (id),
    kind       TEXT    NOT NULL CHECK (kind IN ('uiSitemap', 'userFlows', 'businessDataModel', 'repoTopology')),
    items_json TEXT    NOT NULL,
    PRIMARY KEY (run_id, kind)
);

-- prod_123 "Hikai": seed 002's examples. One source, a baseline, two completed runs (the newer one
-- holds the seed's context inputs) and a newer failed run that is ignored.
INSERT INTO products (id, name) VALUES ('prod_123', 'Hikai');
INSERT INTO product_baselines VALUES (
    'prod_123', 'Hikai', 'SaaS', 'Product intelligence hub', '["PM","Design"]', '["decision support"]'
);
INSERT INTO product_sources VALUES (
    'prod_123', 'github:org/repo', 'product_core', '["/apps/webapp","/packages/ui"]', 'Monorepo con app principal'
);
INSERT INTO context_runs VALUES (1, 'prod_123', 'completed', '2026-01-10T09:00:00Z');
INSERT INTO context_run_outputs VALUES
    (1, 'uiSitemap', '["/dashboard"]'),
    (1, 'userFlows', '["Create project"]'),
    (1, 'businessDataModel', '["project"]'),
    (1, 'repoTopology', '["apps/webapp"]');
INSERT INTO context_runs VALUES (2, 'prod_123', 'completed', '2026-01-14T16:30:00Z');
INSERT INTO context_run_outputs VALUES
    (2, 'uiSitemap', '["/settings/product","/dashboard"]'),
    (2, 'userFlows', '["Create project","Invite member"]'),
    (2, 'businessDataModel', '["project","milestone"]'),
    (2, 'repoTopology', '["apps/webapp","packages/convex"]');
INSERT INTO context_runs VALUES (3, 'prod_123', 'failed', '2026-01-15T08:00:00Z');
INSERT INTO context_run_outputs VALUES (3, 'uiSitemap', '["/broken"]');

-- prod_456 "Atlas": no baseline, 120 sources (repo-001 … repo-120, for pagination) and a completed
-- run that wrote only two of the four outputs.
INSERT INTO products (id, name) VALUES ('prod_456', 'Atlas');
WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 120)
INSERT INTO product_sources (product_id, source_id, classification, signals_json, notes)
SELECT 'prod_456',
       printf('github:atlas/repo-%03d', i),
       CASE WHEN i % 3 = 0 THEN 'infrastructure' WHEN i % 3 = 1 THEN 'product_core' ELSE 'library' END,
       printf('["/services/svc-%03d"]', i),
       printf('Service %d', i)
FROM n;
INSERT INTO context_runs VALUES (4, 'prod_456', 'completed', '2026-01-12T11:00:00Z');
INSERT INTO context_run_outputs VALUES
    (4, 'uiSitemap', '["/maps"]'),
    (4, 'repoTopology', '["services"]');

-- prod_789 "Nova": just created — no baseline, no sources, no runs (one still running).
INSERT INTO products (id, name) VALUES ('prod_789', 'Nova');
INSERT INTO context_runs VALUES (5, 'prod_789', 'running', NULL);
