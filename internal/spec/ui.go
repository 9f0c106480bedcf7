package spec

import "time"

// UILoginCode is a one-time login code for the web UI
// (POST /v1/ui/login-codes): the link ADDRESS/ui/#login=CODE works once,
// until Expires.
type UILoginCode struct {
	Code    string    `json:"code"`
	Expires time.Time `json:"expires"`
}

// UIIdentity is who the web UI's user is and what they may do
// (GET /v1/ui/whoami): the UI shows only the actions that will be allowed,
// and says why the others are not.
type UIIdentity struct {
	// ACL is false when the server runs without ACLs: everything is allowed.
	ACL        bool   `json:"acl"`
	Token      string `json:"token,omitempty"` // the token's name
	TokenType  string `json:"token_type,omitempty"`
	Management bool   `json:"management"`
	// Node lists the node capabilities granted (read, write).
	Node []string `json:"node,omitempty"`
	// Namespaces lists the namespaces the UI offers (the default, every
	// one a job lives in, every one a policy names) with what the token
	// may do in each; one it may do nothing in is left out.
	Namespaces []UINamespace `json:"namespaces"`
}

// UINamespace is one namespace and the capabilities granted in it.
type UINamespace struct {
	Name         string   `json:"name"`
	Capabilities []string `json:"capabilities"`
}
