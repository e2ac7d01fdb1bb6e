//go:build !race

package outbox

// raceDetector: the race detector is off; allocation counts are exact.
const raceDetector = false
