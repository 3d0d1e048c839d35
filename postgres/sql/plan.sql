-- Planner settings for the statement that follows this one in the same
-- implicit transaction (a chained step of a pipeline: claim.go,
-- pipelined), local to that transaction, so they end with it and no
-- session keeps them. The claims, the post-check and the statements that
-- complete, retry, release or extend a list of jobs run after it when
-- their connection prepares statements (pgx's default exec mode; always
-- on an advisory claimer's own connection).
--
-- enable_seqscan off. A statement given a list of job ids must find them
-- by primary key. pgx prepares each statement once per connection, and
-- after five runs PostgreSQL keeps a generic plan, made for the table as
-- it was then: on a new, still small table that plan scans the table and
-- hashes the ids, and it stays until the first autoanalyze, a minute or
-- more later, while the table grows. Measured at 15,000 jobs/s offered on
-- fresh tables: post-checks of 50-80 ms each, 76-676 jobs/s drained for
-- the first 40 s, until the autoanalyze made PostgreSQL plan again.
--
-- enable_sort off. A claim must read the claim index in order and stop
-- at its LIMIT. In the advisory walk the locking LATERAL join keeps the
-- LIMIT's fraction from reaching the UNION ALL below it, so each branch is
-- planned to return all its rows; once the planner believes a branch's
-- range is large (a backlog, fresh statistics, a table bloated while a
-- long transaction held the MVCC horizon) a sequential scan and a sort of
-- the whole range looks cheaper than the ordered index scan, and every
-- claim then reads and sorts the backlog (measured: 551 ms for 32 jobs of
-- a 300,000-job backlog in a 22,728-page table, against under 1 ms on the
-- index). With sorting off, the ordered index scan is the plan that costs
-- least, whatever the statistics say.
--
-- enable_hashjoin and enable_mergejoin off. The SKIP LOCKED claim's
-- UPDATE joins its candidates to the table; planned without knowing how
-- many the LIMIT lets through, that join hashes a sequential scan of the
-- whole table (415 ms for 32 jobs there) instead of looking each one up by
-- primary key.
--
-- jit off. Planned for all rows, the advisory walk costs enough for JIT,
-- which would compile it on every run (tens of milliseconds) for a walk
-- that reads tens of rows.
--
-- plan_cache_mode force_generic_plan. A custom plan knows the LIMIT and so
-- costs less than the generic plan: PostgreSQL then plans every claim
-- afresh (1.3-2 ms of CPU on the server, more than the claim itself). With
-- the settings above the plan is the same for any arguments, so one
-- generic plan per connection serves every run.
SELECT set_config('enable_seqscan', 'off', true),
       set_config('enable_sort', 'off', true),
       set_config('enable_hashjoin', 'off', true),
       set_config('enable_mergejoin', 'off', true),
       set_config('jit', 'off', true),
       set_config('plan_cache_mode', 'force_generic_plan', true)
