package registry

import (
	"context"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/drover-org/drover/internal/spec"
)

// getAllocsBatch is how many allocs one read takes: two gets each, within
// etcd's default --max-txn-ops of 128, so that it works on any etcd.
const getAllocsBatch = 64

// GetAllocs reads the allocs with the given IDs, with their status; IDs
// that do not exist (any more) are left out. It costs one transaction per
// getAllocsBatch allocs, whatever the size of the cluster.
func (r *Registry) GetAllocs(ctx context.Context, ids []string) ([]*spec.Alloc, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	var out []*spec.Alloc
	for start := 0; start < len(ids); start += getAllocsBatch {
		batch := ids[start:min(len(ids), start+getAllocsBatch)]
		ops := make([]clientv3.Op, 0, 2*len(batch))
		for _, id := range batch {
			if err := checkName("alloc id", id); err != nil {
				return nil, err
			}
			ops = append(ops, clientv3.OpGet(r.prefix+dirAllocs+id), clientv3.OpGet(r.prefix+dirAllocStatus+id))
		}
		resp, err := r.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, wrap("read allocs", err)
		}
		var allocKVs, statusKVs []*mvccpb.KeyValue
		for i, res := range resp.Responses {
			kvs := res.GetResponseRange().Kvs
			if i%2 == 0 {
				allocKVs = append(allocKVs, kvs...)
			} else {
				statusKVs = append(statusKVs, kvs...)
			}
		}
		as, err := r.mergeAllocs(allocKVs, statusKVs, false)
		if err != nil {
			return nil, err
		}
		out = append(out, as...)
	}
	sortAllocs(out)
	return out, nil
}
