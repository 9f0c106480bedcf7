package spec

import "time"

// Token types.
const (
	TokenManagement = "management" // may do everything
	TokenClient     = "client"     // may do what its policies grant
)

// ACLToken is an API token. SecretID is shown once, when the token is
// created; the server keeps only its SHA-256, so no read returns it.
type ACLToken struct {
	AccessorID string    `json:"accessor_id"`
	SecretID   string    `json:"secret_id,omitempty"`
	Name       string    `json:"name"`
	Type       string    `json:"type"`
	Policies   []string  `json:"policies,omitempty"`
	CreateTime time.Time `json:"create_time"`
}

// ACLTokenRequest creates a token.
type ACLTokenRequest struct {
	Name     string   `json:"name"`
	Type     string   `json:"type,omitempty"` // "" is client
	Policies []string `json:"policies,omitempty"`
}

// ACLPolicy is a named set of rules, kept as the HCL source the operator
// wrote (acl.Parse reads it).
type ACLPolicy struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Rules       string `json:"rules"`
	ModifyIndex int64  `json:"modify_index,omitempty"`
}
