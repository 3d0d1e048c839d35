-- Planner settings for the claim that follows this statement in the same
-- implicit transaction (a chained step of a pipeline: claim.go,
-- pipelined), local to that transaction, so they end with it and no
-- session keeps them. Both claimers' claims run after it.
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
-- generic plan per connection serves every claim.
SELECT set_config('enable_sort', 'off', true),
       set_config('enable_hashjoin', 'off', true),
       set_config('enable_mergejoin', 'off', true),
       set_config('jit', 'off', true),
       set_config('plan_cache_mode', 'force_generic_plan', true)
