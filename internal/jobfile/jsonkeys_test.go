package jobfile

import "testing"

// TestJSONKeysAnyCharacter: a map key with a DEL or an invalid byte is a
// key like any other. The checked tree used to be rebuilt with Go's
// quoting (\x7f, not JSON), so such a job was refused with "invalid
// character 'x' in string escape code" (found by FuzzDecodeUnit).
func TestJSONKeysAnyCharacter(t *testing.T) {
	src := `{"name":"web","meta":{"a` + "\x7f" + `":"1","b` + "\xff" + `":"2"},"groups":[{"name":"g","tasks":[{"name":"t","driver":"exec","config":{"command":"/bin/true"},"env":{"C` + "\x7f" + `":"3"}}]}]}`
	job, err := DecodeJSONBody([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if job.Meta["a\x7f"] != "1" || job.Meta["b\uFFFD"] != "2" || job.Groups[0].Tasks[0].Env["C\x7f"] != "3" {
		t.Fatalf("meta %q, env %q", job.Meta, job.Groups[0].Tasks[0].Env)
	}
}
