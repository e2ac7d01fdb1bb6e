package cdc

import "time"

// streamingDeadline bounds how long a test waits for its relay to stream.
// A relay that creates its slot waits until every transaction open on the
// cluster has ended, and on the shared cluster those are the transactions
// of every test running beside it (go test -parallel, other packages): the
// bound is generous because only a failing test waits it out.
const streamingDeadline = 2 * time.Minute
