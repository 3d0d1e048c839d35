package mssql

import (
	"fmt"

	"github.com/dbqueue/dbq/queue"
)

// Strategy picks the claim statement.
type Strategy int

const (
	// DeleteTop is the default: DELETE TOP (n) ... WITH (NOWAIT, ROWLOCK)
	// of a random pick among the first Window ready rows (the randomized top-X pick of SQL Server archiving agents). A
	// claimer that meets a row another claimer is taking fails at once with
	// error 1222 and picks again.
	DeleteTop Strategy = iota
	// UpdLock claims the first n ready rows in claim order that no one else
	// has locked, WITH (UPDLOCK, READPAST, ROWLOCK, READCOMMITTEDLOCK), as
	// Hangfire, Rebus and NServiceBus do. It is here for comparison; both are crash-safe the
	// same way.
	UpdLock
)

func (s Strategy) String() string {
	switch s {
	case DeleteTop:
		return "deletetop"
	case UpdLock:
		return "updlock"
	}
	return fmt.Sprintf("Strategy(%d)", int(s))
}

// Defaults and limits for [Config] fields.
const (
	DefaultClaimers      = 10
	DefaultClaimAttempts = 5
	// WindowPerClaimer is X per expected claimer: the seed's X ≈ 100·N.
	WindowPerClaimer = 100
	// MaxWindow bounds Window: every claim reads and sorts that many rows.
	MaxWindow = 100_000
	// MaxClaim is the most jobs one Claim takes; a larger n gets at most
	// this many. With RescueBatch and the lease batches it keeps every
	// statement far below the 5,000 locks at which SQL Server escalates.
	MaxClaim = 1000
	// RescueBatch is the most expired leases one rescue statement moves.
	RescueBatch = 1000
)

// Config configures the SQL Server dialect. The zero value means the
// defaults documented on each field.
type Config struct {
	queue.Config

	// Claimers is how many claimers are expected to run at once on one
	// queue, across all processes. It only sizes the default Window.
	// Default 10.
	Claimers int
	// Window is the seed's X: a DeleteTop claim picks its jobs at random
	// among the first Window ready jobs in claim order, so that concurrent
	// claimers rarely pick the same row; a claim for more than Window jobs
	// reads n rows instead. Larger means fewer collisions (error 1222) and
	// looser order; every claim reads and sorts this many rows. Default
	// 100 × Claimers, at most MaxWindow. Unused by UpdLock.
	Window int
	// Strategy picks the claim statement. Default DeleteTop.
	Strategy Strategy
	// ClaimAttempts bounds how often one Claim runs its statement when it
	// meets a locked row (error 1222) or is chosen as a deadlock victim
	// (1205), with a short random pause between runs; Complete, Retry,
	// Release and Extend rerun a deadlock victim as often. When all fail,
	// the error is one queue.IsRetryable reports. Default 5.
	ClaimAttempts int
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	c.Config = c.Config.WithDefaults()
	if c.Claimers == 0 {
		c.Claimers = DefaultClaimers
	}
	if c.Window == 0 {
		c.Window = min(WindowPerClaimer*max(c.Claimers, 1), MaxWindow)
	}
	if c.ClaimAttempts == 0 {
		c.ClaimAttempts = DefaultClaimAttempts
	}
	return c
}

// Validate checks c after defaults. Errors wrap queue.ErrInvalidConfig or
// queue.ErrInvalidIdentifier.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if err := c.Config.Validate(); err != nil {
		return err
	}
	switch {
	case c.Claimers < 1:
		return fmt.Errorf("%w: Claimers %d < 1", queue.ErrInvalidConfig, c.Claimers)
	case c.Window < 1 || c.Window > MaxWindow:
		return fmt.Errorf("%w: Window %d not in 1..%d", queue.ErrInvalidConfig, c.Window, MaxWindow)
	case c.Strategy != DeleteTop && c.Strategy != UpdLock:
		return fmt.Errorf("%w: unknown %v", queue.ErrInvalidConfig, c.Strategy)
	case c.ClaimAttempts < 1 || c.ClaimAttempts > 100:
		return fmt.Errorf("%w: ClaimAttempts %d not in 1..100", queue.ErrInvalidConfig, c.ClaimAttempts)
	}
	return nil
}
