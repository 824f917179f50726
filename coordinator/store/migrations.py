"""The schema, as numbered migrations. Never edit one that has shipped: add the next.

One list serves both engines. Each step is written for SQLite; on PostgreSQL its types are
translated (`dialect.postgresql_ddl`), and a step whose SQL differs beyond types has its
PostgreSQL text in `POSTGRESQL_STEPS`, under the same number. A PostgreSQL database is only
ever made from step 1 on (PostgreSQL support came with step 11), so those texts need not move
old rows the way the SQLite steps do, but they do where it is cheap.
"""

from typing import Final

LEADERSHIP_TABLE: Final = """
    CREATE TABLE IF NOT EXISTS leadership (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        epoch INTEGER NOT NULL,
        holder TEXT NOT NULL,
        url TEXT,
        expires_at REAL NOT NULL,
        since REAL NOT NULL,
        session_lock INTEGER NOT NULL DEFAULT 0
    );
    """
"""Migration 13, which `leader.py` also runs (in the writers' lock) on a database that has
not got it yet."""

MIGRATIONS: Final[tuple[str, ...]] = (
    # 1: the first schema.
    """
    CREATE TABLE workspaces (
        name TEXT PRIMARY KEY,
        pools TEXT NOT NULL DEFAULT '[]',
        gpu_quota INTEGER,
        max_priority INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL
    );
    CREATE TABLE tokens (
        id INTEGER PRIMARY KEY,
        hash TEXT NOT NULL UNIQUE,
        role TEXT NOT NULL CHECK (role IN ('admin', 'member', 'agent')),
        workspace TEXT REFERENCES workspaces(name),
        machine TEXT,
        description TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL
    );
    CREATE TABLE machines (
        name TEXT PRIMARY KEY,
        report TEXT,
        address TEXT,
        last_seen TEXT,
        acked_seq INTEGER NOT NULL DEFAULT -1,
        cordon_reason TEXT,
        labels TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL
    );
    CREATE TABLE reservations (
        id INTEGER PRIMARY KEY,
        machine TEXT NOT NULL REFERENCES machines(name),
        labels TEXT NOT NULL DEFAULT '{}',
        workspace TEXT,
        starts_at TEXT,
        ends_at TEXT
    );
    CREATE TABLE runs (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        workspace TEXT NOT NULL,
        name TEXT NOT NULL,
        spec TEXT NOT NULL,
        priority INTEGER NOT NULL,
        state TEXT NOT NULL,
        reason TEXT,
        shape TEXT,
        landing TEXT,
        network TEXT,
        nvlink_domain TEXT,
        submitted_at TEXT NOT NULL,
        first_evaluated_at TEXT,
        ended_at TEXT,
        UNIQUE (workspace, name)
    );
    CREATE INDEX runs_queue ON runs (state, priority DESC, seq);
    CREATE TABLE tasks (
        id INTEGER PRIMARY KEY,
        run_seq INTEGER NOT NULL REFERENCES runs(seq),
        idx INTEGER NOT NULL,
        name TEXT NOT NULL,
        state TEXT NOT NULL,
        machine TEXT,
        gpu_ids TEXT NOT NULL DEFAULT '[]',
        cpu_cores REAL NOT NULL DEFAULT 0,
        memory_bytes INTEGER NOT NULL DEFAULT 0,
        reason TEXT,
        placement TEXT,
        exit_code INTEGER,
        message TEXT,
        cancel INTEGER NOT NULL DEFAULT 0,
        assigned_at TEXT,
        started_at TEXT,
        ended_at TEXT,
        UNIQUE (run_seq, idx)
    );
    CREATE INDEX tasks_machine ON tasks (machine, state);
    CREATE INDEX tasks_state ON tasks (state);
    -- One row per GPU a live task holds. The primary key is the invariant: no GPU in two tasks.
    CREATE TABLE gpu_holds (
        machine TEXT NOT NULL,
        gpu_id TEXT NOT NULL,
        task_id INTEGER NOT NULL REFERENCES tasks(id),
        PRIMARY KEY (machine, gpu_id)
    );
    CREATE INDEX gpu_holds_task ON gpu_holds (task_id);
    CREATE TABLE logs (
        id INTEGER PRIMARY KEY,
        task_id INTEGER NOT NULL REFERENCES tasks(id),
        offset INTEGER NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX logs_task ON logs (task_id, offset);
    """,
    # 2: explanations stored once and shared: at 5,000 machines one is ~400 KB, and every run
    # asking alike waits for the same reasons.
    """
    CREATE TABLE explanations (
        id INTEGER PRIMARY KEY,
        body TEXT NOT NULL
    );
    ALTER TABLE tasks ADD COLUMN explanation_id INTEGER REFERENCES explanations(id);
    CREATE INDEX tasks_explanation ON tasks (explanation_id);
    INSERT INTO explanations (id, body)
        SELECT id, placement FROM tasks WHERE placement IS NOT NULL;
    UPDATE tasks SET explanation_id = id WHERE placement IS NOT NULL;
    ALTER TABLE tasks DROP COLUMN placement;
    """,
    # 3: a report's version, so the pass worker re-reads only the reports that changed (5,000
    # reports are megabytes of text per pass otherwise).
    """
    ALTER TABLE machines ADD COLUMN report_version INTEGER NOT NULL DEFAULT 0;
    """,
    # 4: storage faults and partitions. `held`: a Lost task whose worker may still run keeps its
    # GPUs, cores and memory (and its `gpu_holds` rows) on its machine until the machine's agent
    # says the worker is gone. `write_probe`: the one row a health check writes to learn whether
    # the file takes writes.
    """
    ALTER TABLE tasks ADD COLUMN held INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX tasks_held ON tasks (held) WHERE held = 1;
    CREATE TABLE write_probe (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        at TEXT NOT NULL
    );
    """,
    # 5: a task's identity in the cluster (names repeat across workspaces), which is all agents
    # and the coordinator name a task by; and where each log chunk ends, so chunks apply by offset.
    """
    ALTER TABLE tasks ADD COLUMN uid TEXT;
    UPDATE tasks SET uid = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4'
        || substr(hex(randomblob(2)), 2) || '-' || substr('89ab', 1 + abs(random()) % 4, 1)
        || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)));
    CREATE UNIQUE INDEX tasks_uid ON tasks (uid);
    ALTER TABLE logs ADD COLUMN end_offset INTEGER NOT NULL DEFAULT 0;
    UPDATE logs SET end_offset = offset + length(CAST(data AS BLOB));
    """,
    # 6: what a waiting run's or task's reason is (`shared.reasons.ReasonKind`), stored next to
    # the text so no reader classifies the text again. Reasons written before are cleared, not
    # read back: the next pass explains every pending run again, with its kind.
    """
    ALTER TABLE runs ADD COLUMN reason_kind TEXT;
    ALTER TABLE tasks ADD COLUMN reason_kind TEXT;
    UPDATE runs SET reason = NULL WHERE state = 'Pending';
    UPDATE tasks SET reason = NULL WHERE state = 'Pending';
    """,
    # 7: rendezvous ports, held like GPUs: a run's worker 0 (an array element) holds `port` on its
    # machine while it holds resources; no two such tasks of one machine hold the same port.
    """
    ALTER TABLE tasks ADD COLUMN port INTEGER;
    CREATE UNIQUE INDEX tasks_port ON tasks (machine, port) WHERE port IS NOT NULL
        AND (state IN ('Assigned', 'Starting', 'Running') OR held = 1);
    """,
    # 8: what keeps each machine of an explanation out, as data (`shared.RejectionGroup`: filter,
    # code, room, machines), stored with its explanation; null for explanations written before.
    """
    ALTER TABLE explanations ADD COLUMN rejections TEXT;
    """,
    # 9: the machines' change feed. Every insert or update moves the machine's `stamp` past every
    # other machine's (SQLite runs one writer at a time), so a reader that remembers the highest
    # stamp it read reads only the rows changed since (the pass worker, `Machines.reload`).
    """
    ALTER TABLE machines ADD COLUMN stamp INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX machines_stamp ON machines (stamp);
    CREATE TRIGGER machines_stamp_insert AFTER INSERT ON machines BEGIN
        UPDATE machines SET stamp = (SELECT max(stamp) FROM machines) + 1 WHERE name = NEW.name;
    END;
    CREATE TRIGGER machines_stamp_update AFTER UPDATE ON machines
        WHEN NEW.stamp = OLD.stamp BEGIN
        UPDATE machines SET stamp = (SELECT max(stamp) FROM machines) + 1 WHERE name = NEW.name;
    END;
    """,
    # 10: token ids are never used again: a revoke from an old listing must not reach a newer
    # token that took a revoked one's id (`INTEGER PRIMARY KEY` reuses the highest id once its
    # row is gone; AUTOINCREMENT never does). The table is rebuilt as it was, ids kept.
    """
    CREATE TABLE tokens_kept (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        hash TEXT NOT NULL UNIQUE,
        role TEXT NOT NULL CHECK (role IN ('admin', 'member', 'agent')),
        workspace TEXT REFERENCES workspaces(name),
        machine TEXT,
        description TEXT NOT NULL DEFAULT '',
        created_at TEXT NOT NULL
    );
    INSERT INTO tokens_kept (id, hash, role, workspace, machine, description, created_at)
        SELECT id, hash, role, workspace, machine, description, created_at FROM tokens;
    DROP TABLE tokens;
    ALTER TABLE tokens_kept RENAME TO tokens;
    """,
    # 11: a workspace's quotas on CPU cores and memory besides GPUs (issue 25.8): runs without
    # GPUs ask for cores and memory, and count against these; null: no quota.
    """
    ALTER TABLE workspaces ADD COLUMN cpu_quota REAL;
    ALTER TABLE workspaces ADD COLUMN memory_quota INTEGER;
    """,
    # 12: fair share (issue 28.1). Each workspace's weight; its usage decayed with a half-life
    # and its raw totals (`store/usage.py`); GPU- and core-seconds per hour for the last day and
    # week (pruned past 8 days); the one time usage was counted up to; ended tasks by end time.
    """
    ALTER TABLE workspaces ADD COLUMN fair_share_weight REAL NOT NULL DEFAULT 1;
    CREATE TABLE workspace_usage (
        workspace TEXT PRIMARY KEY,
        gpu_seconds REAL NOT NULL DEFAULT 0,
        core_seconds REAL NOT NULL DEFAULT 0,
        gpu_seconds_total REAL NOT NULL DEFAULT 0,
        core_seconds_total REAL NOT NULL DEFAULT 0,
        as_of TEXT NOT NULL
    );
    CREATE TABLE usage_hours (
        workspace TEXT NOT NULL,
        hour TEXT NOT NULL,
        gpu_seconds REAL NOT NULL DEFAULT 0,
        core_seconds REAL NOT NULL DEFAULT 0,
        PRIMARY KEY (workspace, hour)
    );
    CREATE TABLE usage_clock (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        as_of TEXT NOT NULL
    );
    CREATE INDEX tasks_ended ON tasks (ended_at);
    """,
    # 13: leader election on PostgreSQL (issue 27.2, `leader.py`): the one lease row. Who leads
    # (`holder`: host and pid; `url`: where clients go), the fencing `epoch` every write of the
    # leader checks, when the lease ends by the database's clock (seconds since 1970), since
    # when it leads, and whether the leader holds the coordinator lock on its lease session.
    # `IF NOT EXISTS`: a coordinator makes it before it opens the store (a standby never
    # migrates). SQLite has one coordinator per file and never uses it.
    LEADERSHIP_TABLE,
    # 14: requeue after a fault (issue 28.5). The run's attempt now (1, then one more per
    # requeue); each attempt that ended without success, with when its first worker started,
    # when it ended, why, and how many workers it had (`run_attempts`); a task's GPU fault, when
    # its worker ended while one of its GPUs was reported faulted (`fault`, in words). An
    # earlier attempt's tasks stay (they may still hold GPUs, and their usage counts), out of
    # the run's way at negative indexes.
    """
    ALTER TABLE runs ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE tasks ADD COLUMN fault TEXT;
    CREATE TABLE run_attempts (
        run_seq INTEGER NOT NULL REFERENCES runs(seq),
        number INTEGER NOT NULL,
        started_at TEXT,
        ended_at TEXT NOT NULL,
        reason TEXT,
        workers INTEGER NOT NULL,
        PRIMARY KEY (run_seq, number)
    );
    """,
    # 15: preemption and guarantees (issue 28.3, 28.2). A run told to stop for a higher-priority
    # one or reclaimed by a workspace within its guarantee (`preempting`, until its workers are
    # gone and it is back in the queue), when it last was, why (`preempted_reason`, its text),
    # for what priority and for which run (`preempted_for`: its row, never shown; that run holds
    # the machines meanwhile), and how many times (preemptions use up no retry); a workspace's
    # `guaranteed_gpus`; a task's own grace period between SIGTERM and SIGKILL when the
    # coordinator chose one (`stop_grace`); and one row per preemption, which the cluster-wide
    # rate limit counts.
    """
    ALTER TABLE runs ADD COLUMN preempting INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN preempted_at TEXT;
    ALTER TABLE runs ADD COLUMN preempted_for_priority INTEGER;
    ALTER TABLE runs ADD COLUMN preemptions INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN preempted_reason TEXT;
    ALTER TABLE runs ADD COLUMN preempted_for INTEGER;
    ALTER TABLE workspaces ADD COLUMN guaranteed_gpus INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE tasks ADD COLUMN stop_grace REAL;
    CREATE TABLE preemptions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at TEXT NOT NULL,
        priority INTEGER NOT NULL,
        victims INTEGER NOT NULL,
        gpus INTEGER NOT NULL
    );
    CREATE INDEX preemptions_at ON preemptions (at);
    CREATE INDEX runs_preempting ON runs (preempting) WHERE preempting = 1;
    """,
    # 16: a run's name may be used again once the run has ended (issue 30). Each run gets its
    # own identity, `uid`, as tasks have; an ended run whose name is taken again (or that its
    # user deletes) is retired: `retired_at` set and its name moved out of the way to
    # `<name>~<uid>` (no run name holds `~`), so `UNIQUE (workspace, name)` keeps holding for
    # the runs a name can reach, and the retired run's rows (tasks, attempts, usage) stay.
    """
    ALTER TABLE runs ADD COLUMN uid TEXT;
    UPDATE runs SET uid = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4'
        || substr(hex(randomblob(2)), 2) || '-' || substr('89ab', 1 + abs(random()) % 4, 1)
        || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6)));
    CREATE UNIQUE INDEX runs_uid ON runs (uid);
    ALTER TABLE runs ADD COLUMN retired_at TEXT;
    """,
    # 17: each machine's report also in the compact form the coordinator reads back without
    # parsing it again (`coordinator/compact.py`), written with the report in one transaction;
    # NULL for a report stored before (read in full, as before, until the machine's next new
    # report). The report's JSON stays: it is what the agent said, for a machine's details.
    """
    ALTER TABLE machines ADD COLUMN compact TEXT;
    """,
)

POSTGRESQL_STEPS: Final[dict[int, str]] = {
    # 5: uids from PostgreSQL's own UUIDs (13 and newer); a chunk's end counted in bytes.
    5: """
    ALTER TABLE tasks ADD COLUMN uid TEXT;
    UPDATE tasks SET uid = gen_random_uuid()::text;
    CREATE UNIQUE INDEX tasks_uid ON tasks (uid);
    ALTER TABLE logs ADD COLUMN end_offset BIGINT NOT NULL DEFAULT 0;
    UPDATE logs SET end_offset = "offset" + octet_length(data);
    """,
    # 9: the change feed's stamps, by a trigger function. Writers take one advisory lock each
    # (`dialect.pg_begin`), so `max + 1` is in commit order as it is in SQLite.
    9: """
    ALTER TABLE machines ADD COLUMN stamp BIGINT NOT NULL DEFAULT 0;
    CREATE INDEX machines_stamp ON machines (stamp);
    CREATE FUNCTION machines_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' OR NEW.stamp = OLD.stamp THEN
            NEW.stamp := (SELECT coalesce(max(stamp), 0) FROM machines) + 1;
        END IF;
        RETURN NEW;
    END;
    $$;
    CREATE TRIGGER machines_stamp BEFORE INSERT OR UPDATE ON machines
        FOR EACH ROW EXECUTE FUNCTION machines_stamp();
    """,
    # 10: identity columns never reuse an id: nothing to rebuild.
    10: "",
    # 16: uids from PostgreSQL's own UUIDs.
    16: """
    ALTER TABLE runs ADD COLUMN uid TEXT;
    UPDATE runs SET uid = gen_random_uuid()::text;
    CREATE UNIQUE INDEX runs_uid ON runs (uid);
    ALTER TABLE runs ADD COLUMN retired_at TEXT;
    """,
}
"""PostgreSQL's text of the steps whose SQL differs beyond types, by step number."""


def migration(number: int, postgresql: bool) -> str:
    """Step `number` (from 1) for the engine."""
    if not postgresql:
        return MIGRATIONS[number - 1]
    from .dialect import postgresql_ddl

    return postgresql_ddl(POSTGRESQL_STEPS.get(number, MIGRATIONS[number - 1]))
