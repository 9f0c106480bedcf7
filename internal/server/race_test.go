//go:build race

package server

// raceSlowdown scales the tests' bounds on time: the race detector makes
// the code it instruments several times slower (.ci/run's -race step), and
// a bound that catches a quadratic regression still does at five times.
const raceSlowdown = 5
