package spec

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The history stored by earlier versions reads with the typed event types:
// every type's value is the string those versions wrote, this record
// holding one of each (alloc status changes written as the status,
// capitalized; a deployment's as its status).
func TestEventTypesReadStoredHistory(t *testing.T) {
	stored := `[{"type":"Submitted"},{"type":"Stopped"},{"type":"Restart Requested"},{"type":"Purged"},
		{"type":"Registered"},{"type":"Down"},{"type":"Ready"},{"type":"Elected"},
		{"type":"Placed"},{"type":"Stopping"},{"type":"Evicted"},
		{"type":"Pending"},{"type":"Running"},{"type":"Complete"},{"type":"Failed"},{"type":"Lost"},
		{"type":"Healthy"},{"type":"Unhealthy"},{"type":"running"},{"type":"successful"},{"type":"failed"},{"type":"cancelled"},
		{"type":"Received"},{"type":"Started"},{"type":"Terminated"},{"type":"Restarting"},{"type":"Not Restarting"},
		{"type":"Killing"},{"type":"Killed"},{"type":"Driver Failure"},{"type":"Completed"},{"type":"Adopted"},
		{"type":"Check Passing"},{"type":"Check Failing"},{"type":"Restart Signaled"},{"type":"OOM Killed"}]`
	want := []EventType{EventSubmitted, EventStopped, EventRestartRequested, EventPurged,
		EventRegistered, EventDown, EventReady, EventElected,
		EventPlaced, EventStopping, EventEvicted,
		ClientPending.EventType(), ClientRunning.EventType(), ClientComplete.EventType(), ClientFailed.EventType(), ClientLost.EventType(),
		EventHealthy, EventUnhealthy, DeploymentRunning.EventType(), DeploymentSuccessful.EventType(), DeploymentFailed.EventType(), DeploymentCancelled.EventType(),
		EventReceived, EventStarted, EventTerminated, EventRestarting, EventNotRestart,
		EventKilling, EventKilled, EventDriverFail, EventCompleted, EventAdopted,
		EventCheckPassing, EventCheckFailing, EventCheckRestart, EventOutOfMemory}
	var evs []Event
	if err := json.Unmarshal([]byte(stored), &evs); err != nil {
		t.Fatal(err)
	}
	var got []EventType
	for _, e := range evs {
		got = append(got, e.Type)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stored event types (-want +got):\n%s", diff)
	}
}
