package postgres

import "slices"

// backendPID returns the server process of the claimer's connection, 0
// when it has none. For tests.
func (c *AdvisoryClaimer) backendPID() uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return 0
	}
	return c.conn.Conn().PgConn().PID()
}

// heldIDs returns the jobs the claimer holds. For tests.
func (c *AdvisoryClaimer) heldIDs() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]int64, 0, len(c.held))
	for id := range c.held {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
