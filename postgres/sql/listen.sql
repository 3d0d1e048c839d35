-- Subscribes the listener's connection to the jobs table's notification
-- channel, which the enqueue statements notify. A channel is a name, not
-- a value: the template function channel (sql.go) puts in its quoted name.
LISTEN {{channel}}
