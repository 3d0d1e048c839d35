// Package integration is the dbq conformance suite: the claim contract of
// Claimer contract (package queue) checked against a real database. Every dialect, including a
// third party's, runs it from one test:
//
//	func TestConformance(t *testing.T) {
//		integration.Run(t, integration.Harness{Dialect: "postgres", NewQueue: …, Migrator: …, Kill: …})
//	}
//
// Subtests run in parallel, each on tables of its own.
package integration

import (
	"testing"
)

// Run runs the whole conformance suite against h.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewQueue == nil || h.Kill == nil {
		t.Fatal("integration: Harness needs NewQueue and Kill")
	}
	s := &suite{h: h}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, s)
		})
	}
}

type suite struct{ h Harness }

type testCase struct {
	name string
	fn   func(t *testing.T, s *suite)
}

// cases are the suite's subtests; names read as behaviour.
var cases = []testCase{
	{"ClaimsInPriorityRunAtIDOrder", testClaimOrder},
	{"ClaimsAtMostN", testClaimLimit},
	{"ClaimsEachQueueFairly", testFairAcrossQueues},
	{"CheckPasses", testCheck},
	{"HonoursRunAt", testHonoursRunAt},
	{"SkipsHeldJobs", testSkipsHeld},
	{"PayloadBytesRoundTrip", testPayloadRoundTrip},
	{"CompleteRemovesJobs", testComplete},
	{"CompleteClaimCompletesThenClaims", testCompleteClaim},
	{"RetryBacksOffKeepsErrorThenDead", testRetry},
	{"RetryDeadMakesJobDead", testRetryDead},
	{"ReleaseSpendsNoAttempt", testRelease},
	{"StaleTokenLosesLease", testStaleToken},
	{"ExpiredLeaseIsReclaimed", testLeaseExpiry},
	{"DeadClaimerGivesJobsBack", testDeadClaimer},
	{"ExactlyOnceUnderConcurrency", testExactlyOnce},
	{"HoldsExactlyItsLocks", testHeldLocks},
	{"CancelledClaimLeaksNothing", testCancelledClaim},
	{"BadInputGetsTypedErrors", testBadInput},
	{"DuplicateDedupeKey", testDedupe},
	{"NotMigrated", testNotMigrated},
	{"MigrateUpDownUp", testMigrations},
	{"WorkerRunsEveryJobOnce", testWorkerDrains},
	{"WorkerShutsDownGracefully", testWorkerShutdown},
	{"WorkerMarksDead", testWorkerDead},
	{"WorkerExitsWhenEmpty", testWorkerExitWhenEmpty},
	{"ActivityOfProcessesIsSummed", testActivitySummed},
	{"ActivityPrunesOldestInBatches", testActivityPrune},
	{"ProcessRowHeartbeatAndRemoval", testProcessRow},
	{"WorkerCountsItsActivity", testWorkerActivity},
	{"EnqueueUniqueReturnsExisting", testEnqueueUnique},
	{"EnqueueUniqueRaceStoresOne", testEnqueueUniqueRace},
	{"CancelLeavesHeldJobs", testCancel},
	{"PauseStopsClaims", testPause},
	{"SnoozeKeepsAttempt", testSnooze},
	{"RetryDeadRevivesJobs", testRetryDeadAdmin},
	{"JobsListsAndPages", testJobsList},
	{"CountQueuesStopsAtLimitAcrossPriorities", testCountQueuesAcrossPriorities},
	{"FrozenClaimerLosesItsJob", testFrozenClaimer},
	{"WorkerSnoozeRunsAgain", testWorkerSnooze},
	{"LeavesPoolSessionsAsFound", testPoolSessions},
	{"ProducerInsertsWithPlainSQL", testProducer},
	{"SchedulesMakeOneJobPerTick", testSchedules},
	{"SchedulesAreTheirNames", testScheduleEdits},
	{"KindsRoundTrip", testKindsRoundTrip},
	{"KindsUnknownRetriedThenDead", testKindsUnknown},
}
