package server

import (
	"net/http"
	"strings"
	"testing"
)

// A job or a node that fits in the request's 1 MB but not in one etcd
// request once encoded (JSON escapes '<' to six bytes) is refused with a
// 413 that says so, writes nothing, and leaves a node ID free to register
// properly after.
func TestRecordTooLargeForTheRegistryIs413(t *testing.T) {
	e := apiServer(t)
	big := strings.Repeat("<", 300<<10)
	job := `{"name":"big","groups":[{"name":"g","tasks":[{"name":"t","driver":"exec","config":{"command":"sleep"}}]}],"meta":{"k":"` + big + `"}}`
	status, body := call(t, "POST", e.hs.URL+"/v1/jobs", job, nil)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(body, "a record holds at most") {
		t.Fatalf("big job: %d %s", status, body)
	}
	if status, _ := call(t, "GET", e.hs.URL+"/v1/jobs/big", "", nil); status != http.StatusNotFound {
		t.Fatalf("the refused job is stored: GET says %d", status)
	}
	node := `{"id":"big-node","name":"big-node","resources":{"cpu":1000,"memory":1000},"drivers":["exec"],"meta":{"k":"` + big + `"}}`
	if status, body := call(t, "POST", e.hs.URL+"/v1/nodes", node, nil); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("big node: %d %s", status, body)
	}
	small := `{"id":"big-node","name":"big-node","resources":{"cpu":1000,"memory":1000},"drivers":["exec"]}`
	if status, body := call(t, "POST", e.hs.URL+"/v1/nodes", small, nil); status != http.StatusOK {
		t.Fatalf("the same node ID, registered properly after: %d %s", status, body)
	}
}
