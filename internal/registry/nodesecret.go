package registry

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Node credentials:
//
//	node_secrets/<id>   hex SHA-256 of the node's secret
//
// Kept apart from nodes/<id> so that no read of nodes can return it. It is
// written once, when a node first registers, and never changed: a second
// registration under the same ID must prove it holds the secret.
const dirNodeSecrets = "node_secrets/"

// CreateNodeSecret stores the hash of a new node's secret, only if the node
// has none: ErrConflict when another registration got there first.
func (r *Registry) CreateNodeSecret(ctx context.Context, id, hash string) error {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	key, err := r.key(dirNodeSecrets, "node id", id)
	if err != nil {
		return err
	}
	resp, err := r.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, hash)).Commit()
	if err != nil {
		return wrap("store secret of node "+id, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("registry: node %q already has a secret: %w", id, ErrConflict)
	}
	return nil
}
