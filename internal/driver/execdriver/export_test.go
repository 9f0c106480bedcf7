package execdriver

import (
	"sync/atomic"
	"testing"

	"github.com/drover-org/drover/internal/driver"
)

// CountProcScans counts the passes over /proc that measuring makes until
// the test ends.
func CountProcScans(t *testing.T) *atomic.Int64 {
	n := new(atomic.Int64)
	scan := scanGroups
	scanGroups = func() (map[int]driver.Usage, error) {
		n.Add(1)
		return scan()
	}
	t.Cleanup(func() { scanGroups = scan })
	return n
}
