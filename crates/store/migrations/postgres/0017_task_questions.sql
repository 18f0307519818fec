-- The questions an MCP task's call waits on (its `input_required` state, see src/cluster.rs), so
-- that tasks/get and tasks/update work on any instance: the instance running the call writes a
-- row per question it asks; tasks/get on any instance reads the unanswered ones; tasks/update on
-- any instance sets `answer`; the running instance takes (deletes) the answered rows and hands
-- each answer to the call waiting on it. A finished call's rows are removed; rows of a call cut
-- by a crash go a day after they were asked.
CREATE TABLE task_questions (
    task_id      TEXT NOT NULL,
    question_key TEXT NOT NULL,
    principal    TEXT NOT NULL,
    -- The MCP input request, JSON.
    request      TEXT NOT NULL,
    asked_ms     BIGINT NOT NULL,
    -- The client's answer, JSON; NULL while the question waits.
    answer       TEXT,
    PRIMARY KEY (task_id, question_key)
);
CREATE INDEX task_questions_by_age ON task_questions (asked_ms);
